package playbook

import (
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/expr"
)

// A shell script's ${{ }} parts become variable references. shellVars
// reads the script as sh does, far enough to know the quoting at each
// part: unquoted, in "double quotes", in 'single quotes', in a here-document
// (quoted delimiter or not), in $(( arithmetic )). It does not run or fully
// parse the script; what it cannot keep working is reported.

// shellVar is one variable a rewritten script references.
type shellVar struct {
	Name string
	Expr string // the expression's source, trimmed
}

// shellRefusal is a ${{ }} part the rewrite cannot keep working.
type shellRefusal struct {
	Offset int // of the ${{ in the script
	Why    string
}

type shellQuote int

const (
	qNone       shellQuote = iota // unquoted: "${V}"
	qDouble                       // inside "...": ${V}
	qSingle                       // inside '...': '"${V}"'
	qBackquoted                   // in backquotes inside "...": \"${V}\"
	qArith                        // $(( )): refused
	qLiteral                      // a here-document with a quoted delimiter: refused
	qCommentRef                   // a comment: any reference will do
)

type shellFrame struct {
	kind   byte // 't' words, '"' double, '\'' single, 'a' arithmetic, 'h' here-document
	closer byte // for 't': ')' for $( ), '`' for backquotes, 0 for the script
	bare   bool // for 't': backquotes inside double quotes, where a quote is written \"
	depth  int  // open parentheses
}

type heredoc struct {
	delim  string
	strip  bool // <<-
	quoted bool
}

// rewriteShell returns script with each ${{ }} part replaced by a quoted
// reference to a variable, the variables (one per distinct expression, in
// order) and the parts it refuses. taken reports a name already in use.
func rewriteShell(parts []expr.TemplatePart, taken func(string) bool) (string, []shellVar, []shellRefusal) {
	text, at := flatten(parts)
	lx := &shellLexer{text: text, stack: []shellFrame{{kind: 't'}}}
	names := map[string]string{}
	var vars []shellVar
	var refused []shellRefusal
	var out strings.Builder
	next := 0 // index into at of the next part
	for i := 0; i < len(text); {
		if next < len(at) && at[next].pos == i {
			pt := at[next].part
			next++
			q := lx.quote()
			switch q {
			case qArith:
				refused = append(refused, shellRefusal{pt.Offset, "is inside $(( )), where the shell would evaluate its value as arithmetic; compute it in the expression instead (${{ inputs.n + 1 }})"})
			case qLiteral:
				refused = append(refused, shellRefusal{pt.Offset, "is inside a here-document with a quoted delimiter, which never expands a variable; unquote the delimiter or pass the text through stdin"})
			}
			src := strings.TrimSpace(pt.Expr)
			name, ok := names[src]
			if !ok {
				name = varName(src, len(vars)+1, taken)
				names[src] = name
				vars = append(vars, shellVar{Name: name, Expr: src})
			}
			out.WriteString(reference(name, q))
			lx.word = true
			i++
			continue
		}
		n := lx.step(i)
		out.WriteString(text[i : i+n])
		i += n
	}
	// The result is a template again: a literal ${{ is written $${{.
	return strings.ReplaceAll(out.String(), "${{", "$${{"), vars, refused
}

// reference is the text that reads variable name at a place quoted q.
func reference(name string, q shellQuote) string {
	switch q {
	case qNone:
		return `"${` + name + `}"`
	case qSingle:
		return `'"${` + name + `}"'`
	case qBackquoted:
		return `\"${` + name + `}\"`
	}
	return "${" + name + "}"
}

type partAt struct {
	pos  int
	part expr.TemplatePart
}

// flatten joins the literal parts, each ${{ }} part standing as one byte
// ('x', a word character) at its recorded position.
func flatten(parts []expr.TemplatePart) (string, []partAt) {
	var b strings.Builder
	var at []partAt
	for _, p := range parts {
		if p.IsExpr {
			at = append(at, partAt{b.Len(), p})
			b.WriteByte('x')
			continue
		}
		b.WriteString(p.Lit)
	}
	return b.String(), at
}

// varName names the variable of expression src: RB_ and the reference in
// capitals for a plain reference (inputs.who: RB_INPUTS_WHO), RB_<n>
// otherwise; a name taken gets a suffix.
func varName(src string, n int, taken func(string) bool) string {
	base := "RB_" + strconv.Itoa(n)
	if isReference(src) {
		base = "RB_" + strings.ToUpper(strings.ReplaceAll(src, ".", "_"))
	}
	name := base
	for k := 2; taken(name); k++ {
		name = base + "_" + strconv.Itoa(k)
	}
	return name
}

func isReference(src string) bool {
	if src == "" || len(src) > 60 {
		return false
	}
	for _, w := range strings.Split(src, ".") {
		if w == "" || !identByte(w[0], true) {
			return false
		}
		for i := 1; i < len(w); i++ {
			if !identByte(w[i], false) {
				return false
			}
		}
	}
	return true
}

type shellLexer struct {
	text    string
	stack   []shellFrame
	pending []heredoc // here-documents whose body starts at the next line
	doc     *heredoc  // the here-document being read
	word    bool      // the last byte read belongs to a word (a # does not start a comment)
	comment bool
}

func (lx *shellLexer) top() *shellFrame  { return &lx.stack[len(lx.stack)-1] }
func (lx *shellLexer) push(f shellFrame) { lx.stack = append(lx.stack, f) }
func (lx *shellLexer) pop() {
	if len(lx.stack) > 1 {
		lx.stack = lx.stack[:len(lx.stack)-1]
	}
}

// quote is how a reference must be written at the current place.
func (lx *shellLexer) quote() shellQuote {
	if lx.comment {
		return qCommentRef
	}
	f := lx.top()
	switch f.kind {
	case '"':
		return qDouble
	case '\'':
		return qSingle
	case 'a':
		return qArith
	case 'h':
		if lx.doc.quoted {
			return qLiteral
		}
		return qDouble
	}
	if f.bare {
		return qBackquoted
	}
	return qNone
}

// step reads the syntax that starts at text[i] and returns its length.
func (lx *shellLexer) step(i int) int {
	s := lx.text[i:]
	c := s[0]
	if lx.comment {
		if c == '\n' {
			lx.comment = false
			return lx.newline()
		}
		return 1
	}
	f := lx.top()
	switch f.kind {
	case '\'':
		if c == '\'' {
			lx.pop()
		}
		return 1
	case 'h':
		return lx.docByte(i)
	case 'a':
		switch {
		case c == '(':
			f.depth++
		case c == ')' && f.depth == 0 && strings.HasPrefix(s, "))"):
			lx.pop()
			return 2
		case c == ')' && f.depth > 0:
			f.depth--
		}
		return 1
	case '"':
		return lx.doubleByte(s)
	}
	return lx.wordByte(s)
}

// doubleByte reads inside double quotes.
func (lx *shellLexer) doubleByte(s string) int {
	switch {
	case s[0] == '\\' && len(s) > 1:
		return 2
	case s[0] == '"':
		lx.pop()
		return 1
	case strings.HasPrefix(s, "$(("):
		lx.push(shellFrame{kind: 'a'})
		return 3
	case strings.HasPrefix(s, "$("):
		lx.push(shellFrame{kind: 't', closer: ')'})
		return 2
	case s[0] == '`':
		lx.push(shellFrame{kind: 't', closer: '`', bare: true})
		return 1
	}
	return 1
}

// wordByte reads outside quotes.
func (lx *shellLexer) wordByte(s string) int {
	f := lx.top()
	c := s[0]
	wasWord := lx.word
	lx.word = !strings.ContainsRune(" \t\n;&|()<>", rune(c))
	switch {
	case c == '\\' && len(s) > 1:
		lx.word = true
		if s[1] == '\n' {
			lx.word = false
		}
		return 2
	case c == '\'':
		lx.push(shellFrame{kind: '\''})
	case c == '"':
		lx.push(shellFrame{kind: '"'})
	case strings.HasPrefix(s, "$(("):
		lx.push(shellFrame{kind: 'a'})
		return 3
	case strings.HasPrefix(s, "$("):
		lx.push(shellFrame{kind: 't', closer: ')'})
		return 2
	case c == '`':
		if f.closer == '`' {
			lx.pop()
		} else {
			lx.push(shellFrame{kind: 't', closer: '`', bare: f.bare || f.kind == '"'})
		}
	case c == '(':
		f.depth++
	case c == ')':
		if f.depth > 0 {
			f.depth--
		} else if f.closer == ')' {
			lx.pop()
		}
	case c == '#' && !wasWord:
		lx.comment = true
	case c == '\n':
		return lx.newline()
	case strings.HasPrefix(s, "<<"):
		return lx.heredocOp(s)
	}
	return 1
}

// heredocOp reads "<<[-] [quoted]word" and queues the here-document.
func (lx *shellLexer) heredocOp(s string) int {
	n := 2
	d := heredoc{}
	if n < len(s) && s[n] == '-' {
		d.strip = true
		n++
	}
	for n < len(s) && (s[n] == ' ' || s[n] == '\t') {
		n++
	}
	var delim strings.Builder
	for n < len(s) && !strings.ContainsRune(" \t\n;&|()<>", rune(s[n])) {
		switch c := s[n]; c {
		case '\'', '"':
			d.quoted = true
			end := strings.IndexByte(s[n+1:], c)
			if end < 0 {
				return len(s)
			}
			delim.WriteString(s[n+1 : n+1+end])
			n += end + 2
			continue
		case '\\':
			d.quoted = true
			n++
			continue
		}
		delim.WriteByte(s[n])
		n++
	}
	d.delim = delim.String()
	if d.delim != "" {
		lx.pending = append(lx.pending, d)
	}
	lx.word = false
	return n
}

// newline ends a line of words: queued here-documents start.
func (lx *shellLexer) newline() int {
	lx.word = false
	if len(lx.pending) > 0 {
		d := lx.pending[0]
		lx.pending = lx.pending[1:]
		lx.doc = &d
		lx.push(shellFrame{kind: 'h'})
	}
	return 1
}

// docByte reads a here-document body a line at a time: the line that is
// its delimiter ends it.
func (lx *shellLexer) docByte(i int) int {
	line := lx.text[i:]
	if k := strings.IndexByte(line, '\n'); k >= 0 {
		line = line[:k]
	}
	if i > 0 && lx.text[i-1] != '\n' {
		return 1 // mid-line: the start of the line was read already
	}
	check := line
	if lx.doc.strip {
		check = strings.TrimLeft(check, "\t")
	}
	if check != lx.doc.delim {
		return 1
	}
	lx.pop()
	lx.doc = nil
	n := len(line)
	if i+n < len(lx.text) {
		n++ // the newline
		if len(lx.pending) > 0 {
			n-- // let newline start the next document
		}
	}
	return n
}
