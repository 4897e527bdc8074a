package notify

import (
	"context"
	"fmt"
	"strings"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/notify/channel"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

type notifyParams struct {
	Channel string `json:"channel" required:"true" minLength:"1" desc:"a channel of notifications.channels in the config of runbook serve"`
	Message string `json:"message" required:"true" minLength:"1" desc:"the message; secrets and values derived from them are masked"`
	Subject string `json:"subject" desc:"the first line, a chat message's header, an e-mail's subject (default: runbook: step ID)"`
}

func init() {
	steps.Register(steps.Define(steps.Def[notifyParams]{
		Type: "notify",
		Summary: "Send a message to a notification channel of the config (Slack-compatible webhook, signed webhook, e-mail). " +
			"Not mutating: a resumed run may send it again, with the same webhook-id.",
		Example: map[string]any{"channel": "ops-chat", "subject": "cluster upgraded", "message": "prod-1 is on v1.29.3"},
		Outputs: []steps.Output{
			{Name: "channel", Type: "string", Description: "the channel it was sent to"},
			{Name: "key", Type: "string", Description: "the message's key, a signed webhook's webhook-id"},
		},
		Run: runNotify,
	}))
}

func runNotify(ctx context.Context, c *steps.Call, p *notifyParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := c.Host.Connection(channel.ConnectionPrefix + p.Channel)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("channel %q is not a notification channel of the config (notifications.channels, under runbook serve)", p.Channel)}
	}
	settings, err := channel.FromMap(conn)
	if err == nil {
		var ch channel.Channel
		if ch, err = channel.New(settings); err == nil {
			return send(ctx, c, p, ch)
		}
	}
	return nil, &fault.Error{Code: fault.Invalid, Message: "channel " + p.Channel + ": " + err.Error()}
}

func send(ctx context.Context, c *steps.Call, p *notifyParams, ch channel.Channel) (steps.Outputs, error) {
	subject := p.Subject
	if subject == "" {
		subject = "runbook: step " + c.StepID
	}
	subject = c.Host.Mask(subject)
	key := "step/" + c.RunID + "/" + c.StepID
	text := subject + "\n" + c.Host.Mask(p.Message) + "\nRun: " + c.RunID
	n := state.Notification{Key: key, Event: "step.notify", Channel: p.Channel, RunID: c.RunID, Subject: subject, Text: text,
		Data: map[string]any{"run_id": c.RunID, "step": c.StepID, "message": c.Host.Mask(p.Message)}, CreatedAt: c.Now()}
	if err := ch.Send(ctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &fault.Error{Code: fault.Unavailable, Message: "notify " + p.Channel + ": " + c.Host.Mask(strings.TrimSpace(err.Error()))}
	}
	return steps.Outputs{"channel": p.Channel, "key": key}, nil
}
