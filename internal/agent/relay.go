package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// What an agent sends about an assignment reaches its owner directly when
// the agent's request lands on the owner, and through the store (mail
// sealed to the owner's key) when it lands on another replica.

// mailBody is one mail to an assignment's owner (Lines, or a host Call
// whose answer goes to Request, sealed to ReplyKey), or an owner's answer
// to a relayed host call (Answer).
type mailBody struct {
	Lines    []api.AgentLine      `json:"lines,omitempty"`
	Call     *api.AgentHostCall   `json:"call,omitempty"`
	Request  string               `json:"request,omitempty"`
	ReplyKey []byte               `json:"reply_key,omitempty"`
	Answer   *api.AgentHostAnswer `json:"answer,omitempty"`
}

// local returns the waiter of assignment id when this replica owns it and
// session holds it.
func (d *Dispatcher) local(id, session string) *waiter {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waits[id]; w != nil && session != "" && w.session == session {
		return w
	}
	return nil
}

// held reads assignment id, which session must hold (placed on it, not
// ended nor withdrawn): ErrLost otherwise.
func (d *Dispatcher) held(ctx context.Context, id, session string) (state.AgentAssignment, error) {
	rec, err := d.store.AgentAssignment(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return rec, ErrLost
	}
	if err != nil {
		return rec, err
	}
	if rec.Session != session || rec.Ended() || rec.Withdrawn {
		return rec, ErrLost
	}
	return rec, nil
}

// post seals body to key and mails it to to.
func (d *Dispatcher) post(ctx context.Context, to string, key []byte, body mailBody) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	sealed, err := sealTo(key, b)
	if err != nil {
		return fmt.Errorf("seal for %s: %w", to, err)
	}
	if _, err := d.store.PostAgentMail(ctx, state.AgentMail{To: to, Body: sealed}); err != nil {
		if errors.Is(err, state.ErrAgentMailFull) {
			return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("the replica executing the run reads no lines (%d bytes wait): try again", state.MaxAgentMail), Err: err}
		}
		return err
	}
	return nil
}

// Lines relays the lines an assignment printed to its step's output,
// where they are masked, capped and stored as a local step's are.
func (d *Dispatcher) Lines(ctx context.Context, id string, l api.AgentLines) error {
	if w := d.local(id, l.Session); w != nil {
		for _, ln := range l.Lines {
			w.a.Call.Print(ln.Stream, ln.Text)
		}
		return nil
	}
	rec, err := d.held(ctx, id, l.Session)
	if err != nil {
		return err
	}
	if err := d.post(ctx, id, rec.OwnerKey, mailBody{Lines: l.Lines}); err != nil {
		return err
	}
	d.tell("m:" + id)
	return nil
}

// maxRelayWait bounds how long a relayed host call waits for the owner's
// answer.
const maxRelayWait = 2 * time.Minute

// Host answers a host call of an assignment's step: here when this
// replica owns it, else through its owner.
func (d *Dispatcher) Host(ctx context.Context, id string, hc api.AgentHostCall) (api.AgentHostAnswer, error) {
	if w := d.local(id, hc.Session); w != nil {
		return d.hostCall(ctx, w, hc), nil
	}
	rec, err := d.held(ctx, id, hc.Session)
	if err != nil {
		return api.AgentHostAnswer{}, err
	}
	req := newID("r-")
	wake := make(chan struct{}, 1)
	d.mu.Lock()
	d.relays[req] = wake
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.relays, req)
		d.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, maxRelayWait)
	defer cancel()
	ask := func(key []byte) error {
		if err := d.post(ctx, id, key, mailBody{Call: &hc, Request: req, ReplyKey: d.keys.pub[:]}); err != nil {
			return err
		}
		d.tell("m:" + id)
		return nil
	}
	if err := ask(rec.OwnerKey); err != nil {
		return api.AgentHostAnswer{}, err
	}
	check := time.NewTicker(2 * time.Second)
	defer check.Stop()
	for {
		mail, err := d.store.AgentMail(ctx, req)
		if err == nil {
			for _, m := range mail {
				if b, ok := d.keys.open(m.Body); ok {
					var body mailBody
					if json.Unmarshal(b, &body) == nil && body.Answer != nil {
						return *body.Answer, nil
					}
				}
			}
		}
		select {
		case <-wake:
		case <-check.C:
			// The run changed hands: the call goes to its new owner.
			now, err := d.held(ctx, id, hc.Session)
			if errors.Is(err, ErrLost) {
				return api.AgentHostAnswer{}, err
			}
			if err == nil && string(now.OwnerKey) != string(rec.OwnerKey) {
				rec = now
				if err := ask(rec.OwnerKey); err != nil {
					return api.AgentHostAnswer{}, err
				}
			}
		case <-ctx.Done():
			return api.AgentHostAnswer{}, &fault.Error{Code: fault.Unavailable, Message: "the replica executing the run did not answer the step's host call", Err: ctx.Err()}
		}
	}
}

// hostCall runs a host call of w's step on this replica, its owner.
func (d *Dispatcher) hostCall(ctx context.Context, w *waiter, hc api.AgentHostCall) api.AgentHostAnswer {
	if hc.Op == "checkpoint" {
		d.mu.Lock()
		w.checkpoint = hc.Data
		d.mu.Unlock()
	}
	h := w.a.Call.Host
	var ans api.AgentHostAnswer
	var err error
	switch hc.Op {
	case "checkpoint":
		err = h.Checkpoint(ctx, hc.Data)
	case "connection":
		ans.Connection, err = h.Connection(hc.Name)
	case "cursor":
		ans.Data, err = h.Cursor(ctx, hc.Name)
	case "set_cursor":
		err = h.SetCursor(ctx, hc.Name, hc.Data)
	default:
		err = &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("unknown host call %q", hc.Op)}
	}
	if err != nil {
		ans.Error = errorOf(err)
	}
	return ans
}

// readMail relays the mail w's agent sent through other replicas: lines
// to the step's output, host calls answered to the replica that relayed
// them. Mail sealed for another owner (the run's previous one) is
// dropped: its lines are lost, its host calls asked again.
func (d *Dispatcher) readMail(ctx context.Context, w *waiter) {
	mail, err := d.store.AgentMail(ctx, w.id)
	if err != nil {
		return
	}
	dropped := 0
	for _, m := range mail {
		b, ok := d.keys.open(m.Body)
		var body mailBody
		if !ok || json.Unmarshal(b, &body) != nil {
			dropped++
			continue
		}
		for _, ln := range body.Lines {
			w.a.Call.Print(ln.Stream, ln.Text)
		}
		if body.Call != nil {
			ans := d.hostCall(ctx, w, *body.Call)
			if err := d.post(ctx, body.Request, body.ReplyKey, mailBody{Answer: &ans}); err != nil {
				d.o.Logger.Warn("answer a relayed host call", "assignment", w.id, "err", err)
				continue
			}
			d.tell("r:" + body.Request)
		}
	}
	if dropped > 0 {
		d.o.Logger.Info("agent mail sealed for the run's previous owner dropped", "assignment", w.id, "mails", dropped)
	}
}

// Result ends an assignment with what its agent sent. A result of a
// session or assignment no longer held is refused (ErrLost): the attempt
// went on without that agent.
func (d *Dispatcher) Result(ctx context.Context, id string, r api.AgentResult) error {
	key := d.keys.pub[:]
	if d.local(id, r.Session) == nil {
		rec, err := d.held(ctx, id, r.Session)
		if err != nil {
			return err
		}
		key = rec.OwnerKey
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sealed, err := sealTo(key, b)
	if err != nil {
		return err
	}
	if err := d.store.FinishAgentAssignment(ctx, id, r.Session, sealed); err != nil {
		if errors.Is(err, state.ErrAgentGone) {
			return ErrLost
		}
		return err
	}
	d.tell("e:"+id, "place")
	return nil
}
