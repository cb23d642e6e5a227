package awsio

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// slotAttempts bounds the read-and-swap rounds of one Acquire or Release
// when other instances keep winning the item; between rounds the loser
// backs off a random few milliseconds (growing), so racing instances
// spread out instead of colliding again.
const slotAttempts = 16

// backoff waits before round attempt (>= 1) of a contended swap.
func backoff(ctx context.Context, attempt int) {
	d := time.Duration(1+rand.IntN(5*min(attempt, 8))) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ErrSlotContention: Acquire or Release lost the item to other instances
// slotAttempts times in a row (the caller defers, as if no slot were free).
var ErrSlotContention = errors.New("slot item contended")

// Slots is a counting semaphore shared by every instance of the fleet, one
// item per class in the coordinator's table: pk "SLOTS#<class>", sk
// "SLOTS", attributes holders (a map holder -> lease end, unix ms) and
// ver. Acquire reads the item (consistent), drops holders whose lease has
// ended (a crashed holder frees its slot after its lease time, with no
// one to release it), and adds the caller only while fewer than the limit
// hold a slot, writing the whole map with a condition on ver: two
// instances never take the same last slot. Holder names are unique per
// acquisition, so a holder found in the item is the caller's own applied
// write (an SDK retry of a write whose answer was lost, or a refusal
// carrying the item we wrote): it is taken once, never twice, and
// released by the same name. A lease must outlast the holder's run (the
// consumer function's timeout plus clock skew): no heartbeat is needed,
// and an expired lease never belongs to a live holder.
type Slots struct {
	api   DynamoAPI
	table string
}

// NewSlots returns the fleet-wide slots kept in table.
func NewSlots(api DynamoAPI, table string) *Slots { return &Slots{api: api, table: table} }

// SlotGrant says whether Acquire took a slot and, when it did not, when
// the earliest holder's lease ends (a hint for the deferral's delay).
type SlotGrant struct {
	Taken   bool
	Holders int           // holders after the call (live ones)
	FreeIn  time.Duration // when not taken: until the earliest lease ends
}

func slotsKey(class string) map[string]ddb.AttributeValue {
	return map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "SLOTS#" + class}, "sk": &ddb.AttributeValueMemberS{Value: "SLOTS"}}
}

// readSlots returns the live holders of class at now, the item's version
// and whether it exists.
func (s *Slots) readSlots(ctx context.Context, class string) (map[string]int64, int64, bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: slotsKey(class), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, 0, false, translate("read", "slots "+class, err, false)
	}
	if len(out.Item) == 0 {
		return map[string]int64{}, 0, false, nil
	}
	holders, ver, err := decodeSlots(out.Item)
	if err != nil {
		return nil, 0, false, fmt.Errorf("read slots %s: %w", class, err)
	}
	return holders, ver, true, nil
}

func decodeSlots(item map[string]ddb.AttributeValue) (map[string]int64, int64, error) {
	v, err := numAttr(item, "ver")
	if err != nil {
		return nil, 0, err
	}
	holders := map[string]int64{}
	if m, ok := item["holders"].(*ddb.AttributeValueMemberM); ok {
		for h, av := range m.Value {
			n, ok := av.(*ddb.AttributeValueMemberN)
			if !ok {
				return nil, 0, fmt.Errorf("holder %s: lease end not a number", h)
			}
			end, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("holder %s: %w", h, err)
			}
			holders[h] = end
		}
	}
	return holders, int64(v), nil
}

// live drops the holders whose lease ended at or before now.
func live(holders map[string]int64, now time.Time) map[string]int64 {
	out := make(map[string]int64, len(holders))
	for h, end := range holders {
		if end > now.UnixMilli() {
			out[h] = end
		}
	}
	return out
}

// writeSlots replaces class's holders with a condition on the version read
// (or on the item's absence). It reports whether the write applied, which
// includes a refusal whose returned item shows mine applied (mine: the
// holder this call adds, present, or removes, absent).
func (s *Slots) writeSlots(ctx context.Context, class string, holders map[string]int64, ver int64, exists bool, mine func(map[string]int64) bool) (bool, error) {
	m := make(map[string]ddb.AttributeValue, len(holders))
	for h, end := range holders {
		m[h] = &ddb.AttributeValueMemberN{Value: strconv.FormatInt(end, 10)}
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: slotsKey(class),
		UpdateExpression: aws.String("SET holders = :h, ver = :nv"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{
			":h":  &ddb.AttributeValueMemberM{Value: m},
			":nv": &ddb.AttributeValueMemberN{Value: strconv.FormatInt(ver+1, 10)},
		},
		ReturnValuesOnConditionCheckFailure: ddb.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if exists {
		in.ConditionExpression = aws.String("ver = :v")
		in.ExpressionAttributeValues[":v"] = &ddb.AttributeValueMemberN{Value: strconv.FormatInt(ver, 10)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	_, err := s.api.UpdateItem(ctx, in)
	if err == nil {
		return true, nil
	}
	var ccf *ddb.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) > 0 {
			if now, _, err := decodeSlots(ccf.Item); err == nil && mine(now) {
				return true, nil // our own write, applied, then retried by the SDK
			}
		}
		return false, nil
	}
	return false, translate("write", "slots "+class, err, true)
}

// Acquire takes one of limit slots of class for holder until now+lease.
// A holder already in the item (this acquisition's own earlier write) is
// taken, not taken twice.
func (s *Slots) Acquire(ctx context.Context, class, holder string, limit int, now time.Time, lease time.Duration) (SlotGrant, error) {
	var lastErr error
	for attempt := range slotAttempts {
		if attempt > 0 {
			backoff(ctx, attempt)
		}
		if ctx.Err() != nil {
			return SlotGrant{}, fmt.Errorf("acquire slot of %s: %w", class, ctx.Err())
		}
		all, ver, exists, err := s.readSlots(ctx, class)
		if err != nil {
			lastErr = err // throttled or failed: read again
			continue
		}
		holders := live(all, now)
		if _, ok := holders[holder]; ok {
			return SlotGrant{Taken: true, Holders: len(holders)}, nil
		}
		if len(holders) >= limit {
			first := int64(0)
			for _, end := range holders {
				if first == 0 || end < first {
					first = end
				}
			}
			return SlotGrant{Holders: len(holders), FreeIn: time.Duration(first-now.UnixMilli()) * time.Millisecond}, nil
		}
		holders[holder] = now.Add(lease).UnixMilli()
		ok, err := s.writeSlots(ctx, class, holders, ver, exists, func(h map[string]int64) bool { _, in := h[holder]; return in })
		if err != nil {
			// Refused, throttled, or applied with its answer lost: the
			// next read shows whether it applied (our holder is there).
			lastErr = err
			continue
		}
		if ok {
			return SlotGrant{Taken: true, Holders: len(holders)}, nil
		}
		lastErr = nil
	}
	if lastErr != nil {
		return SlotGrant{}, fmt.Errorf("acquire slot of %s: %w", class, lastErr)
	}
	return SlotGrant{}, fmt.Errorf("acquire slot of %s: %w", class, ErrSlotContention)
}

// Release gives holder's slot of class back (expired holders are dropped
// on the way). A holder not in the item has nothing to release. Failed
// reads and writes are retried (a slot that cannot be released frees only
// at its lease end).
func (s *Slots) Release(ctx context.Context, class, holder string, now time.Time) error {
	var lastErr error
	for attempt := range slotAttempts {
		if attempt > 0 {
			backoff(ctx, attempt)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("release slot of %s: %w", class, ctx.Err())
		}
		all, ver, exists, err := s.readSlots(ctx, class)
		if err != nil {
			lastErr = err
			continue
		}
		if _, ok := all[holder]; !ok || !exists {
			return nil
		}
		holders := live(all, now)
		delete(holders, holder)
		ok, err := s.writeSlots(ctx, class, holders, ver, exists, func(h map[string]int64) bool { _, in := h[holder]; return !in })
		if err != nil {
			lastErr = err // the next read shows whether it applied
			continue
		}
		if ok {
			return nil
		}
		lastErr = nil
	}
	if lastErr != nil {
		return fmt.Errorf("release slot of %s: %w", class, lastErr)
	}
	return fmt.Errorf("release slot of %s: %w", class, ErrSlotContention)
}

// Holders returns the live holders of class at now (tests, the operator).
func (s *Slots) Holders(ctx context.Context, class string, now time.Time) (map[string]int64, error) {
	all, _, _, err := s.readSlots(ctx, class)
	if err != nil {
		return nil, err
	}
	return live(all, now), nil
}
