package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Sender sends the outbox's messages: it claims the due ones, sends each
// through its channel and records the attempt. One runs in every replica;
// the claims keep them from sending a message twice while they live.
type Sender struct {
	Store    state.NotificationStore
	Channels map[string]Channel
	// Claimer names this sender in its claims (the replica's process ID).
	Claimer string
	// Backoff is the wait after a first failure, doubling up to
	// MaxBackoff; SendTimeout bounds an attempt, and a claim lasts three
	// times it.
	Backoff, MaxBackoff, SendTimeout time.Duration
	// Poll is how often the outbox is looked at when nothing wakes the
	// sender (default 1 s).
	Poll time.Duration
	Log  *slog.Logger

	wake chan struct{}
	once sync.Once
}

// batch is how many messages one claim takes.
const batch = 16

func (s *Sender) init() {
	s.once.Do(func() {
		s.wake = make(chan struct{}, 1)
		if s.Poll <= 0 {
			s.Poll = time.Second
		}
		if s.Log == nil {
			s.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// Wake makes the sender look at the outbox now (a message was enqueued).
func (s *Sender) Wake() {
	s.init()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	s.init()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
		n, err := s.SendDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.Log.Warn("notification outbox", "error", err)
		}
		next := s.Poll
		if n == batch {
			next = 0 // more may be due
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// SendDue claims the messages due now and sends them, each in its own
// goroutine; it returns how many it claimed.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	s.init()
	due, err := s.Store.ClaimNotifications(ctx, s.Claimer, batch, 3*s.SendTimeout)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, n := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.send(ctx, n)
		}()
	}
	wg.Wait()
	return len(due), nil
}

func (s *Sender) send(ctx context.Context, n state.Notification) {
	log := s.Log.With("notification", n.Key, "channel", n.Channel)
	var err error
	if ch, ok := s.Channels[n.Channel]; ok {
		sctx, cancel := context.WithTimeout(ctx, s.SendTimeout)
		err = ch.Send(sctx, n)
		cancel()
	} else {
		err = fmt.Errorf("channel %s is not in the config", n.Channel)
	}
	if ctx.Err() != nil {
		return // shutting down: the claim lapses and a sender tries again
	}
	a := state.Attempt{Sent: err == nil}
	if err != nil {
		a.Error, a.RetryIn = err.Error(), s.backoff(n.Attempts+1)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch rerr := s.Store.RecordAttempt(rctx, n.Key, s.Claimer, a); {
	case errors.Is(rerr, state.ErrClaimLost):
		log.Info("notification claimed by another sender meanwhile", "sent", a.Sent)
	case rerr != nil:
		log.Warn("recording a notification attempt", "error", rerr)
	case err != nil:
		log.Warn("notification not sent", "attempt", n.Attempts+1, "retry_in", a.RetryIn, "error", err)
	default:
		log.Info("notification sent", "event", n.Event, "run_id", n.RunID)
	}
}

// backoff is the wait after the attempt-th failed attempt.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.Backoff
	for i := 1; i < attempt && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.MaxBackoff)
}
