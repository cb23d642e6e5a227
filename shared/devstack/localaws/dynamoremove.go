package localaws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// minidyn evaluates an UpdateItem's REMOVE clause and then writes back only
// the attributes its evaluation kept, so a removed top-level attribute stays
// on the item while the call succeeds (found when GC's sweep record could
// not clear gc_due_at). DynamoDB deletes it. The embedded stack applies the
// removal itself right after minidyn's update, under one lock with every
// other DynamoDB request, so no request sees the item in between.

// RemovedAttributes returns the top-level attribute names an update
// expression's REMOVE clause deletes (aliases resolved through names).
// Nested paths (a.b, a[0]) are left out: minidyn removes those itself.
func RemovedAttributes(expr string, names map[string]string) []string {
	var out []string
	clause := ""
	for _, tok := range updateTokens(expr) {
		switch u := strings.ToUpper(tok); u {
		case "SET", "REMOVE", "ADD", "DELETE":
			clause = u
			continue
		}
		if clause != "REMOVE" || tok == "," {
			continue
		}
		if strings.ContainsAny(tok, ".[") {
			continue
		}
		if n, ok := names[tok]; ok {
			tok = n
		}
		out = append(out, tok)
	}
	return out
}

// updateTokens splits an update expression into words and commas; the
// words inside a function call's parentheses are one token, so SET's
// operands never read as clause keywords.
func updateTokens(expr string) []string {
	var toks []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range expr {
		switch {
		case r == '(':
			depth++
			cur.WriteRune(r)
		case r == ')':
			depth--
			cur.WriteRune(r)
		case depth > 0:
			cur.WriteRune(r)
		case r == ',':
			flush()
			toks = append(toks, ",")
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// removingDynamo serves DynamoDB through next (minidyn), completing an
// UpdateItem's REMOVE clause as DynamoDB does.
type removingDynamo struct {
	next http.Handler
	mu   sync.Mutex
}

func (d *removingDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), dynamoTarget)
	d.mu.Lock()
	defer d.mu.Unlock()
	if op != "UpdateItem" {
		d.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		TableName                string
		Key                      json.RawMessage
		UpdateExpression         string
		ExpressionAttributeNames map[string]string
		ReturnValues             string
	}
	_ = json.Unmarshal(body, &in) // minidyn answers a malformed request itself
	removed := RemovedAttributes(in.UpdateExpression, in.ExpressionAttributeNames)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if len(removed) == 0 {
		d.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	d.next.ServeHTTP(rec, r)
	answer := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		if err := d.remove(r, in.TableName, in.Key, removed); err != nil {
			http.Error(w, "embedded DynamoDB: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if in.ReturnValues == "ALL_NEW" || in.ReturnValues == "UPDATED_NEW" {
			answer = withoutAttributes(answer, removed)
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(answer)
}

// remove deletes attrs from the item at key: a consistent read and a put of
// what is left (both under d.mu, so atomic for every other request).
func (d *removingDynamo) remove(orig *http.Request, table string, key json.RawMessage, attrs []string) error {
	call := func(op string, payload any) ([]byte, error) {
		b, _ := json.Marshal(payload)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b)).WithContext(orig.Context())
		req.Header.Set("X-Amz-Target", dynamoTarget+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		rec := httptest.NewRecorder()
		d.next.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("%s for REMOVE: %d %s", op, rec.Code, rec.Body.String())
		}
		return rec.Body.Bytes(), nil
	}
	got, err := call("GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	if err != nil {
		return err
	}
	var item struct{ Item map[string]json.RawMessage }
	if err := json.Unmarshal(got, &item); err != nil || item.Item == nil {
		return fmt.Errorf("read the updated item back: %v", err)
	}
	for _, a := range attrs {
		delete(item.Item, a)
	}
	_, err = call("PutItem", map[string]any{"TableName": table, "Item": item.Item})
	return err
}

func withoutAttributes(answer []byte, attrs []string) []byte {
	var out map[string]json.RawMessage
	if json.Unmarshal(answer, &out) != nil {
		return answer
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(out["Attributes"], &a) != nil {
		return answer
	}
	for _, k := range attrs {
		delete(a, k)
	}
	out["Attributes"], _ = json.Marshal(a)
	b, _ := json.Marshal(out)
	return b
}
