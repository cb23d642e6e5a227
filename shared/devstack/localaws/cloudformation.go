package localaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The stack's CloudFormation: DescribeStacks only (the awsquery protocol),
// over stacks registered with PutStack. The local environment registers
// the deployment it runs with the output keys a deployed stack has
// (resources.Out*), so a tool that finds a deployment by its stack's
// outputs (bcc --stack) finds a local one the same way. Requests are
// recognised by their SigV4 credential scope (service cloudformation).

// StackOutput is one output of a registered stack.
type StackOutput struct {
	Key, Value, Description string
}

type cfnStack struct {
	name    string
	created time.Time
	outputs []StackOutput
}

// PutStack registers (or replaces) a stack and its outputs.
func (s *Stack) PutStack(name string, outputs []StackOutput) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stacks == nil {
		s.stacks = map[string]*cfnStack{}
	}
	outs := append([]StackOutput(nil), outputs...)
	sort.Slice(outs, func(i, j int) bool { return outs[i].Key < outs[j].Key })
	s.stacks[name] = &cfnStack{name: name, created: time.Now().UTC().Truncate(time.Second), outputs: outs}
}

func isCloudFormation(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Authorization"), "/cloudformation/aws4_request")
}

const cfnNS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

type cfnOutput struct {
	OutputKey   string
	OutputValue string
	Description string `xml:",omitempty"`
}

type cfnStackXML struct {
	StackName    string
	StackId      string
	CreationTime string
	StackStatus  string
	Outputs      struct {
		Member []cfnOutput `xml:"member"`
	}
}

type cfnDescribeStacks struct {
	XMLName xml.Name `xml:"DescribeStacksResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		Stacks struct {
			Member []cfnStackXML `xml:"member"`
		}
	} `xml:"DescribeStacksResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

type cfnError struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type, Code, Message string
	}
	RequestID string `xml:"RequestId"`
}

func (s *Stack) serveCloudFormation(w http.ResponseWriter, r *http.Request, count func(string, string)) {
	if err := r.ParseForm(); err != nil {
		writeCFNError(w, http.StatusBadRequest, "ValidationError", "malformed form body")
		return
	}
	action := r.PostForm.Get("Action")
	count("cloudformation", action)
	if action != "DescribeStacks" {
		writeCFNError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the embedded stack's CloudFormation serves DescribeStacks only, not %s", action))
		return
	}
	name := r.PostForm.Get("StackName")
	s.mu.Lock()
	var found []*cfnStack
	for n, st := range s.stacks {
		if name == "" || n == name {
			found = append(found, st)
		}
	}
	s.mu.Unlock()
	if name != "" && len(found) == 0 {
		writeCFNError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("Stack with id %s does not exist", name))
		return
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	resp := cfnDescribeStacks{Xmlns: cfnNS, RequestID: "local"}
	for _, st := range found {
		x := cfnStackXML{StackName: st.name, StackStatus: "CREATE_COMPLETE", CreationTime: st.created.Format(time.RFC3339),
			StackId: fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/local", Region, AccountID, st.name)}
		for _, o := range st.outputs {
			x.Outputs.Member = append(x.Outputs.Member, cfnOutput{OutputKey: o.Key, OutputValue: o.Value, Description: o.Description})
		}
		resp.Result.Stacks.Member = append(resp.Result.Stacks.Member, x)
	}
	writeCFN(w, http.StatusOK, resp)
}

func writeCFNError(w http.ResponseWriter, status int, code, msg string) {
	e := cfnError{Xmlns: cfnNS, RequestID: "local"}
	e.Error.Type, e.Error.Code, e.Error.Message = "Sender", code, msg
	writeCFN(w, status, e)
}

func writeCFN(w http.ResponseWriter, status int, v any) {
	b, _ := xml.Marshal(v)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}
