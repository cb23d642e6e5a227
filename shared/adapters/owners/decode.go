package owners

import (
	"bytes"
	"encoding/json"
)

// decodeLoose decodes a small non-contract envelope strictly.
func decodeLoose(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
