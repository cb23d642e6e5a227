package contract

// Message is one SQS FIFO message: its MessageGroupId, its
// MessageDeduplicationId and its body. Every sender (the observer and
// reconciliation for tasks, compaction and GC for completions, the
// simulation) builds messages with TaskMessage and CompletionMessage only,
// so a message's identity has one definition.
type Message struct {
	Group   string // MessageGroupId: the collection (rule 9: one collection's backlog never blocks another's)
	DedupID string // MessageDeduplicationId: the message's identity
	Body    []byte
}

// TaskMessage is the message of a task: group = the collection,
// deduplication id = the task id (a task enqueued twice within SQS's
// deduplication interval is one message).
func TaskMessage(t Task) (Message, error) {
	body, err := Encode(t)
	if err != nil {
		return Message{}, err
	}
	return Message{Group: t.Collection, DedupID: t.TaskID, Body: body}, nil
}

// CompletionMessage is the message of a completion to the handoff: group =
// the collection, deduplication id = CompletionID(c).
func CompletionMessage(c Completion) (Message, error) {
	body, err := Encode(c)
	if err != nil {
		return Message{}, err
	}
	return Message{Group: c.Collection, DedupID: CompletionID(c), Body: body}, nil
}

// CompletionID is a completion's identity: a rewrite's is its cutover
// request id (the task and its exact coverage, so a duplicate report
// collapses and a different result does not); a cleanup's distinguishes a
// complete report from a partial one, so that a partial report never
// suppresses the complete one as a duplicate; any other is its task id.
func CompletionID(c Completion) string {
	switch {
	case c.Coverage != nil:
		return CutoverRequestID(c.TaskID, *c.Coverage)
	case c.Cleanup != nil && c.Cleanup.Complete:
		return c.TaskID + ".done"
	case c.Cleanup != nil:
		return c.TaskID + ".partial"
	}
	return c.TaskID
}
