package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// MaxFunctionZipBytes bounds each function's deployment package: the zip
// the CDK CLI makes of its asset directory at deploy time (Deflate at
// zlib's default level, as here).
const MaxFunctionZipBytes = 4_000_000

// Issue 27: every function's zip, as deployed, is at most 4 MB (before:
// 3.9-4.2 MB with the SDK's shared-configuration loader linked).
func TestFunctionZipsAreAtMost4MB(t *testing.T) {
	for _, f := range def.c.Definition.Functions {
		id := def.id(t, exportName(f.Name)+"Function")
		md := def.resource[id]["Metadata"].(map[string]any)
		dir := filepath.Join(def.outdir, md["aws:asset:path"].(string))
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			w, err := zw.CreateHeader(&zip.FileHeader{Name: rel, Method: zip.Deflate})
			if err != nil {
				return err
			}
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(w, src)
			return err
		})
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			t.Fatalf("%s: zip %s: %v", f.Name, dir, err)
		}
		if buf.Len() > MaxFunctionZipBytes {
			t.Errorf("%s: deployment zip of %d bytes, more than %d", f.Name, buf.Len(), MaxFunctionZipBytes)
		}
		t.Logf("%s: %d-byte zip", f.Name, buf.Len())
	}
}
