package config

import (
	"fmt"
	"net/mail"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

// The kinds of notification channel.
const (
	ChannelSlack   = "slack"   // a Slack-compatible incoming webhook: {text, blocks}
	ChannelWebhook = "webhook" // a JSON POST signed with Standard Webhooks headers
	ChannelEmail   = "email"   // SMTP, STARTTLS, AUTH PLAIN
)

// ChannelKinds lists the kinds a channel's kind accepts.
var ChannelKinds = []string{ChannelSlack, ChannelWebhook, ChannelEmail}

// The events a notification rule's on: may name.
const (
	EventRunFailed       = "run.failed"
	EventRunCancelled    = "run.cancelled"
	EventRunSucceeded    = "run.succeeded"
	EventApprovalWaiting = "approval.waiting"
	EventApprovalOverdue = "approval.overdue"
	EventRunOverdue      = "run.overdue"
	EventScheduleMissed  = "schedule.missed"
	EventDeliveryRefused = "delivery.refused"
)

// Events lists every event a rule may name.
var Events = []string{EventRunFailed, EventRunCancelled, EventRunSucceeded, EventApprovalWaiting,
	EventApprovalOverdue, EventRunOverdue, EventScheduleMissed, EventDeliveryRefused}

// TriggerKinds are the kinds of start a rule's triggers: may name.
var TriggerKinds = []string{"webhook", "schedule", "api", "cli"}

// Defaults of the notifications section.
const (
	DefaultNotifyBackoff     = 10 * time.Second
	DefaultNotifyMaxBackoff  = time.Hour
	DefaultNotifySendTimeout = 10 * time.Second
	DefaultRefusalBurst      = 5
	DefaultRefusalWindow     = 5 * time.Minute
	MinNotifyBackoff         = 100 * time.Millisecond
)

// Notifications is the notifications: section: where messages go
// (Channels) and which events send them (Rules).
type Notifications struct {
	Channels map[string]Channel
	Rules    []Rule
	// Backoff is the wait before the second attempt of a message that
	// failed, doubling up to MaxBackoff: a message is tried for as long
	// as it fails.
	Backoff, MaxBackoff time.Duration
	// SendTimeout bounds one attempt; a sender's claim on a message lasts
	// three times it, after which another replica may send it.
	SendTimeout time.Duration
}

// Channel is one named destination of messages.
type Channel struct {
	Name string
	Kind string // ChannelKinds
	// URL is the address of a slack or webhook channel, or URLSecret the
	// name of the secret holding it (a Slack webhook's URL is itself a
	// credential).
	URL, URLSecret string
	// Secret names the whsec_ secret a webhook channel signs with.
	Secret string
	// SMTP is an email channel's server (host:port); From, To its
	// addresses; Username and PasswordSecret its AUTH PLAIN (none when
	// Username is empty); StartTLS (default true) upgrades the
	// connection before anything is sent, CAFile the PEM file of extra
	// authorities to trust (absolute).
	SMTP, From     string
	To             []string
	Username       string
	PasswordSecret string
	StartTLS       bool
	CAFile         string
	Pos            playbook.Pos
	secretPos      map[string]playbook.Pos
	secretPath     map[string]string
}

// Rule routes the events it matches to channels.
type Rule struct {
	Name string
	On   []string // Events
	// Playbooks are name patterns (path.Match: nightly-*), Labels the
	// labels a playbook must carry, Triggers the kinds of start; empty:
	// any.
	Playbooks []string
	Labels    map[string]string
	Triggers  []string
	// After is how long an approval or a run may take before it is
	// overdue; Percentile (1..99) instead takes that percentile of the
	// playbook's recent successful durations (after: p95; run.overdue
	// only).
	After      time.Duration
	Percentile int
	// Burst refusals of one webhook route within Window make a
	// delivery.refused event.
	Burst  int
	Window time.Duration
	// Channels are the channels' names.
	Channels []string
	Pos      playbook.Pos
}

var (
	notificationKeys = []string{"channels", "rules", "backoff", "max_backoff", "send_timeout"}
	channelKeys      = []string{"kind", "url", "url_secret", "secret", "smtp", "from", "to", "username", "password_secret", "starttls", "ca_file"}
	ruleKeys         = []string{"name", "on", "playbooks", "labels", "triggers", "after", "burst", "within", "channels"}
	percentileRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^p([1-9][0-9]?)$`) })
)

func (l *loader) notifications(c *Config, n *yaml.Node) {
	nt := &c.Notifications
	o := yamlnode.Strict(l.errf, n, "notifications", notificationKeys...)
	if o == nil {
		return
	}
	for _, d := range []struct {
		key string
		to  *time.Duration
	}{{"backoff", &nt.Backoff}, {"max_backoff", &nt.MaxBackoff}, {"send_timeout", &nt.SendTimeout}} {
		if dn := o.Get(d.key); dn != nil {
			if v, ok := l.duration(dn, "notifications."+d.key, MinNotifyBackoff); ok {
				*d.to = v
			}
		}
	}
	if nt.MaxBackoff < nt.Backoff {
		l.errf(o.Get("max_backoff"), "notifications.max_backoff", "must be at least backoff (%s)", nt.Backoff)
	}
	if cn := o.Get("channels"); cn != nil {
		if m := yamlnode.Mapping(l.errf, cn, "notifications.channels"); m != nil {
			for _, p := range m.Pairs {
				cpath := yamlnode.KeyPath("notifications.channels", p.Name)
				if !routeNameRE().MatchString(p.Name) {
					l.errf(p.Key, cpath, "invalid channel name %q: use 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit", p.Name)
					continue
				}
				if ch, ok := l.channel(c, p.Val, cpath); ok {
					ch.Name, ch.Pos = p.Name, l.pos(p.Key)
					nt.Channels[p.Name] = ch
				}
			}
		}
	}
	rn := o.Get("rules")
	if rn == nil {
		return
	}
	items, ok := l.List(rn, "notifications.rules")
	if !ok {
		return
	}
	names := map[string]bool{}
	for i, it := range items {
		rpath := fmt.Sprintf("notifications.rules[%d]", i)
		r, ok := l.rule(nt, it, rpath)
		if !ok {
			continue
		}
		if names[r.Name] {
			l.errf(it, rpath+".name", "rule %q is named twice", r.Name)
			continue
		}
		names[r.Name] = true
		nt.Rules = append(nt.Rules, r)
	}
}

func (l *loader) channel(c *Config, n *yaml.Node, path string) (Channel, bool) {
	o := yamlnode.Strict(l.errf, n, path, channelKeys...)
	if o == nil {
		return Channel{}, false
	}
	ch := Channel{StartTLS: true, secretPos: map[string]playbook.Pos{}, secretPath: map[string]string{}}
	kn := o.Get("kind")
	if kn == nil {
		l.errf(o.Node, path, "kind is required: one of %s", strings.Join(ChannelKinds, ", "))
		return Channel{}, false
	}
	kind, ok := l.Str(kn, path+".kind")
	if !ok {
		return Channel{}, false
	}
	if !slices.Contains(ChannelKinds, kind) {
		l.errf(kn, path+".kind", "unknown channel kind %q (want one of %s)%s", kind, strings.Join(ChannelKinds, ", "), suggest.Hint(kind, ChannelKinds))
		return Channel{}, false
	}
	ch.Kind = kind
	cr := channelReader{l: l, o: o, path: path, ch: &ch, good: true}
	if kind == ChannelEmail {
		cr.email(c)
	} else {
		cr.web()
	}
	return ch, cr.good
}

// channelReader reads the settings of one channel of a known kind.
type channelReader struct {
	l    *loader
	o    *yamlnode.Object
	path string
	ch   *Channel
	good bool
}

func (r *channelReader) str(key string) string {
	vn := r.o.Get(key)
	if vn == nil {
		return ""
	}
	s, ok := r.l.nonEmpty(vn, r.path+"."+key)
	r.good = r.good && ok
	return s
}

func (r *channelReader) secret(key string) string {
	vn := r.o.Get(key)
	if vn == nil {
		return ""
	}
	s, ok := r.l.secretName(vn, r.path+"."+key)
	r.good = r.good && ok
	if ok {
		r.ch.secretPos[s], r.ch.secretPath[s] = r.l.pos(vn), r.path+"."+key
	}
	return s
}

// only refuses the keys a channel of this kind does not take.
func (r *channelReader) only(keys ...string) {
	for _, p := range r.o.Pairs {
		if p.Name != "kind" && !slices.Contains(keys, p.Name) {
			r.l.errf(p.Key, r.path+"."+p.Name, "%s does not apply to a %s channel (it takes %s)", p.Name, r.ch.Kind, strings.Join(keys, ", "))
			r.good = false
		}
	}
}

// web reads a slack or webhook channel.
func (r *channelReader) web() {
	l, o, path, ch := r.l, r.o, r.path, r.ch
	keys := []string{"url", "url_secret"}
	if ch.Kind == ChannelWebhook {
		keys = append(keys, "secret")
	}
	r.only(keys...)
	ch.URL, ch.URLSecret, ch.Secret = r.str("url"), r.secret("url_secret"), r.secret("secret")
	if (ch.URL == "") == (ch.URLSecret == "") && r.good {
		l.errf(o.Node, path, "give url or url_secret (the name of the secret holding the URL), one of them")
		r.good = false
	}
	if ch.URL != "" {
		if u, err := url.Parse(ch.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.errf(o.Get("url"), path+".url", "must be an http:// or https:// URL (got %q)", ch.URL)
			r.good = false
		}
	}
	if ch.Kind == ChannelWebhook && ch.Secret == "" && r.good {
		l.errf(o.Node, path, "secret is required: the name of the whsec_ secret the messages are signed with")
		r.good = false
	}
}

// email reads an email channel.
func (r *channelReader) email(c *Config) {
	l, o, path, ch := r.l, r.o, r.path, r.ch
	r.only("smtp", "from", "to", "username", "password_secret", "starttls", "ca_file")
	ch.SMTP, ch.From, ch.Username, ch.PasswordSecret = r.str("smtp"), r.str("from"), r.str("username"), r.secret("password_secret")
	if ch.SMTP == "" || ch.From == "" || o.Get("to") == nil {
		l.errf(o.Node, path, "smtp (host:port), from and to are required")
		r.good = false
		return
	}
	if msg := checkListen(ch.SMTP); msg != "" || strings.HasPrefix(ch.SMTP, ":") {
		l.errf(o.Get("smtp"), path+".smtp", "want host:port of the SMTP server (e.g. smtp.example.com:587)")
		r.good = false
	}
	if _, err := mail.ParseAddress(ch.From); err != nil {
		l.errf(o.Get("from"), path+".from", "invalid address %q: %v", ch.From, err)
		r.good = false
	}
	ch.To = l.addresses(o.Get("to"), path+".to", &r.good)
	if (ch.Username == "") != (ch.PasswordSecret == "") {
		l.errf(o.Node, path, "username and password_secret go together (AUTH PLAIN)")
		r.good = false
	}
	if sn := o.Get("starttls"); sn != nil {
		if b, ok := l.Bool(sn, path+".starttls"); ok {
			ch.StartTLS = b
		} else {
			r.good = false
		}
	}
	if !ch.StartTLS && ch.Username != "" {
		l.errf(o.Get("starttls"), path+".starttls", "a password is never sent in clear: keep starttls with username and password_secret")
		r.good = false
	}
	ch.CAFile = c.resolve(r.str("ca_file"))
}

func (l *loader) addresses(n *yaml.Node, path string, good *bool) []string {
	items, ok := l.List(n, path)
	if !ok || len(items) == 0 {
		if ok {
			l.errf(n, path, "must name at least one address")
		}
		*good = false
		return nil
	}
	var out []string
	for i, it := range items {
		ipath := yamlnode.IndexPath(path, i)
		s, ok := l.Str(it, ipath)
		if !ok {
			*good = false
			continue
		}
		if _, err := mail.ParseAddress(s); err != nil {
			l.errf(it, ipath, "invalid address %q: %v", s, err)
			*good = false
			continue
		}
		out = append(out, s)
	}
	return out
}

func (l *loader) rule(nt *Notifications, n *yaml.Node, path string) (Rule, bool) {
	o := yamlnode.Strict(l.errf, n, path, ruleKeys...)
	if o == nil {
		return Rule{}, false
	}
	r := Rule{Pos: l.pos(n)}
	good := true
	if nn := o.Get("name"); nn == nil {
		l.errf(o.Node, path, "name is required (runbook notify test NAME sends a sample through the rule)")
		good = false
	} else if s, ok := l.Str(nn, path+".name"); !ok {
		good = false
	} else if !routeNameRE().MatchString(s) {
		l.errf(nn, path+".name", "invalid rule name %q: use 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit", s)
		good = false
	} else {
		r.Name = s
	}
	r.On = l.words(o.Get("on"), path+".on", Events, true, &good)
	r.Triggers = l.words(o.Get("triggers"), path+".triggers", TriggerKinds, false, &good)
	for i, pn := range l.strList(o.Get("playbooks"), path+".playbooks", &good) {
		if _, err := filepath.Match(pn, ""); err != nil {
			l.errf(o.Get("playbooks"), yamlnode.IndexPath(path+".playbooks", i), "invalid pattern %q: %v", pn, err)
			good = false
		}
		r.Playbooks = append(r.Playbooks, pn)
	}
	if ln := o.Get("labels"); ln != nil {
		if m := yamlnode.Mapping(l.errf, ln, path+".labels"); m != nil {
			r.Labels = map[string]string{}
			for _, p := range m.Pairs {
				if s, ok := l.Str(p.Val, yamlnode.KeyPath(path+".labels", p.Name)); ok {
					r.Labels[p.Name] = s
				} else {
					good = false
				}
			}
		}
	}
	good = l.ruleAfter(&r, o, path) && good
	good = l.ruleBurst(&r, o, path) && good
	good = l.ruleChannels(nt, &r, o, path) && good
	return r, good
}

func (l *loader) ruleAfter(r *Rule, o *yamlnode.Object, path string) bool {
	good := true
	overdue := slices.Contains(r.On, EventApprovalOverdue) || slices.Contains(r.On, EventRunOverdue)
	if an := o.Get("after"); an != nil {
		if !overdue {
			l.errf(an, path+".after", "after applies to approval.overdue and run.overdue, which on: does not name")
			good = false
		} else if s := an.Value; an.Kind == yaml.ScalarNode && percentileRE().MatchString(s) {
			if slices.Contains(r.On, EventApprovalOverdue) {
				l.errf(an, path+".after", "a percentile applies to run.overdue only: give approval.overdue a duration in a rule of its own")
				good = false
			}
			r.Percentile, _ = strconv.Atoi(s[1:])
		} else if d, ok := l.Duration(an, path+".after", "30m, 2h, or p95 for run.overdue"); ok {
			r.After = d
		} else {
			good = false
		}
	} else if overdue {
		l.errf(o.Node, path, "after is required with approval.overdue or run.overdue: a duration (1h) or, for run.overdue, a percentile of the playbook's past durations (p95)")
		good = false
	}
	return good
}

func (l *loader) ruleBurst(r *Rule, o *yamlnode.Object, path string) bool {
	good := true
	r.Burst, r.Window = DefaultRefusalBurst, DefaultRefusalWindow
	if bn := o.Get("burst"); bn != nil {
		if v, ok := l.IntBetween(bn, path+".burst", 1, 1_000_000); ok {
			r.Burst = v
		} else {
			good = false
		}
	}
	if wn := o.Get("within"); wn != nil {
		if d, ok := l.duration(wn, path+".within", time.Second); ok {
			r.Window = d
		} else {
			good = false
		}
	}
	if !slices.Contains(r.On, EventDeliveryRefused) {
		for _, k := range []string{"burst", "within"} {
			if kn := o.Get(k); kn != nil {
				l.errf(kn, path+"."+k, "%s applies to delivery.refused, which on: does not name", k)
				good = false
			}
		}
	}
	return good
}

func (l *loader) ruleChannels(nt *Notifications, r *Rule, o *yamlnode.Object, path string) bool {
	good := true
	cn := o.Get("channels")
	if cn == nil {
		l.errf(o.Node, path, "channels is required: the names of the channels to send to")
		return false
	}
	items, ok := l.List(cn, path+".channels")
	if !ok {
		return false
	}
	known := make([]string, 0, len(nt.Channels))
	for name := range nt.Channels {
		known = append(known, name)
	}
	slices.Sort(known)
	for i, it := range items {
		ipath := yamlnode.IndexPath(path+".channels", i)
		s, ok := l.Str(it, ipath)
		if !ok {
			good = false
			continue
		}
		if _, found := nt.Channels[s]; !found {
			hint := suggest.Hint(s, known)
			if hint == "" && len(known) > 0 {
				hint = "; channels: " + strings.Join(known, ", ")
			}
			l.errf(it, ipath, "unknown channel %q%s", s, hint)
			good = false
			continue
		}
		r.Channels = append(r.Channels, s)
	}
	if len(items) == 0 {
		l.errf(cn, path+".channels", "must name at least one channel")
		good = false
	}
	return good
}

// words reads a list of strings each one of allowed (required: at least
// one).
func (l *loader) words(n *yaml.Node, path string, allowed []string, required bool, good *bool) []string {
	if n == nil {
		if required {
			l.errf(nil, path, "is required: a list of %s", strings.Join(allowed, ", "))
			*good = false
		}
		return nil
	}
	var out []string
	items, ok := l.List(n, path)
	if !ok {
		*good = false
		return nil
	}
	for i, it := range items {
		ipath := yamlnode.IndexPath(path, i)
		s, ok := l.Str(it, ipath)
		if !ok {
			*good = false
			continue
		}
		if !slices.Contains(allowed, s) {
			l.errf(it, ipath, "unknown %q (want one of %s)%s", s, strings.Join(allowed, ", "), suggest.Hint(s, allowed))
			*good = false
			continue
		}
		out = append(out, s)
	}
	if required && len(out) == 0 && *good {
		l.errf(n, path, "must name at least one event")
		*good = false
	}
	return out
}

// strList reads a string or a list of strings.
func (l *loader) strList(n *yaml.Node, path string, good *bool) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		s, ok := l.Str(n, path)
		if !ok {
			*good = false
			return nil
		}
		return []string{s}
	}
	items, ok := l.List(n, path)
	if !ok {
		*good = false
		return nil
	}
	var out []string
	for i, it := range items {
		s, ok := l.Str(it, yamlnode.IndexPath(path, i))
		if !ok {
			*good = false
			continue
		}
		out = append(out, s)
	}
	return out
}

// NotificationSecrets lists, for each secret the notification channels
// name, where it is named (file:line:col and path), for messages about a
// secret that is not set.
func (c *Config) NotificationSecrets() []SecretUse {
	var out []SecretUse
	for _, name := range sortedKeys(c.Notifications.Channels) {
		ch := c.Notifications.Channels[name]
		for _, s := range sortedKeys(ch.secretPos) {
			out = append(out, SecretUse{Name: s, Pos: ch.secretPos[s], Path: ch.secretPath[s]})
		}
	}
	return out
}

// SecretUse is where the config names a secret.
type SecretUse struct {
	Name string
	Pos  playbook.Pos
	Path string
}

// MissingSecrets returns a diagnostic, at its place in the file, for each
// secret of the notification channels that lookup does not find.
func (c *Config) MissingSecrets(lookup func(string) (string, bool)) playbook.Diagnostics {
	var ds playbook.Diagnostics
	for _, u := range c.NotificationSecrets() {
		if _, ok := lookup(u.Name); !ok {
			ds = append(ds, playbook.Diagnostic{Pos: u.Pos, Path: u.Path, Message: fmt.Sprintf("secret %s is not set", u.Name)})
		}
	}
	return ds
}

// Rule returns the rule named name.
func (n *Notifications) Rule(name string) (Rule, bool) {
	for _, r := range n.Rules {
		if r.Name == name {
			return r, true
		}
	}
	return Rule{}, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
