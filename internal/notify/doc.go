// Package notify tells people what happened: it turns run, approval,
// schedule and delivery events into messages by the config's rules
// (Notifier), keeps them in the store's outbox (state.NotificationStore)
// and sends them through channels (Sender): a Slack-compatible incoming
// webhook, a Standard Webhooks signed POST, or e-mail over SMTP.
//
// Invariants:
//   - An event has a key ("run.failed/RUN"); the outbox holds one message
//     per key and channel, whichever replicas observe the event and
//     however often.
//   - A message is sent by the sender that claimed it; a claim lasts three
//     times the send timeout, so a replica that dies while sending leaves
//     the message to another after that. A signed webhook carries the
//     message's key as webhook-id, the same on every attempt, so a
//     receiver can drop a second copy; Slack has no such header.
//   - A message that fails is tried again with a doubling backoff for as
//     long as it fails: it stays in the outbox as failing, never dropped.
//   - Texts are masked by the Redactor before they are enqueued: a secret
//     never reaches the store or a channel.
package notify
