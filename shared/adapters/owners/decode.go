package owners

import "github.com/searchfabric/bcc/shared/contract/strictjson"

// decodeLoose decodes a small non-contract envelope strictly: unknown
// fields, case variants of field names and duplicate names are refused
// (strictjson), as for contract documents.
func decodeLoose(b []byte, v any) error {
	return strictjson.Unmarshal(b, v, strictjson.RejectUnknown)
}
