package api

// History answers GET /api/v1/history: the newest runs of each playbook
// the caller may see, newest first, for a grid of their statuses (a
// status matrix).
type History struct {
	// Limit is the most runs of one playbook listed.
	Limit     int               `json:"limit"`
	Playbooks []PlaybookHistory `json:"playbooks"`
}

// PlaybookHistory is one playbook's newest runs, newest first (none when
// it never ran).
type PlaybookHistory struct {
	Playbook string `json:"playbook"`
	Runs     []Run  `json:"runs"`
}
