package expr

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/runbook/runbook/internal/jsonvalue"
)

// Bounds on hostile input. See doc.go.
const (
	// MaxExprLen is the longest expression source, in bytes.
	MaxExprLen = 4 << 10
	// MaxTemplateLen is the longest template string, in bytes.
	MaxTemplateLen = 64 << 10
	// MaxTemplateParts is the most ${{ }} parts one template may hold.
	MaxTemplateParts = 128
	// MaxNodes is the most syntax nodes one expression may have.
	MaxNodes = 1000
	// MemoryBudget is the expr-lang VM memory budget (in its units, roughly
	// list elements and map entries allocated) of one evaluation.
	MemoryBudget = 1_000_000
	// MaxIterations is the most closure iterations (the bodies of map,
	// filter, reduce, all, ...) one evaluation may run, summed over all
	// closures. Nested closures over literal ranges whose product exceeds
	// it are refused at compile time.
	MaxIterations = 1_000_000
	// MaxClosureTime bounds the time closures of one evaluation may run,
	// for iterations that are each expensive.
	MaxClosureTime = 500 * time.Millisecond
	// MaxOutputBytes bounds the bytes of strings one evaluation may build
	// (concatenation, join, repeat, toJSON, ...) and the rendered size of
	// its result.
	MaxOutputBytes = 4 << 20
)

// ErrTooExpensive is wrapped by every error that reports a bound of doc.go
// being hit, at compile or at run time.
var ErrTooExpensive = errors.New("expression too expensive")

// Program is one compiled expression (an `if:`, `retry.if`, or the inside
// of a ${{ }}).
type Program struct {
	src    string
	prog   *vm.Program
	refs   []Ref
	status bool
	// What taint (taint.go) needs: whether the program reads secrets,
	// result or error, and its string literals.
	secret, result, errRef bool
	lits                   stringLits
}

// Compile compiles an expression. src may be bare (`inputs.x > 3`) or one
// whole `${{ ... }}` (whitespace around it is allowed). te nil compiles
// without reference checking: every name of the environment is accepted.
func Compile(src string, te *TypeEnv) (*Program, error) {
	if len(src) > MaxTemplateLen {
		return nil, tooExpensive(0, "source is %d bytes (limit %d)", len(src), MaxTemplateLen)
	}
	trimmed := strings.TrimLeft(src, " \t\r\n")
	lead := len(src) - len(trimmed)
	trimmed = strings.TrimRight(trimmed, " \t\r\n")
	if strings.HasPrefix(trimmed, "${{") {
		end := findClose(trimmed, 3)
		if end < 0 {
			return nil, &CompileError{Offset: lead, Msg: "unterminated ${{ (no matching }})"}
		}
		if end+2 != len(trimmed) {
			return nil, &CompileError{Offset: lead + end + 2, Msg: "an expression must be bare or a single ${{ }}, not text after }}"}
		}
		return compileExpr(trimmed[3:end], lead+3, te)
	}
	p, err := compileExpr(src, 0, te)
	if err != nil && strings.Contains(src, "${{") {
		if ce, ok := err.(*CompileError); ok {
			for i := strings.Index(src, "${{"); i >= 0 && i <= ce.Offset; {
				if ce.Offset <= i+3 {
					return nil, &CompileError{Offset: i, Msg: "an expression must be bare or a single ${{ }}, not text around ${{ }}"}
				}
				j := strings.Index(src[i+1:], "${{")
				if j < 0 {
					break
				}
				i += 1 + j
			}
		}
	}
	return p, err
}

// compileExpr compiles src, which sits at byte offset base of the string
// the caller was given (for error offsets).
func compileExpr(src string, base int, te *TypeEnv) (*Program, error) {
	if len(src) > MaxExprLen {
		return nil, tooExpensive(base, "expression is %d bytes (limit %d)", len(src), MaxExprLen)
	}
	if strings.TrimSpace(src) == "" {
		return nil, &CompileError{Offset: base, Msg: "empty expression"}
	}
	cfg := newConfig()
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		return nil, toCompileError(err, src, base)
	}
	rc := &refChecker{te: te, src: src, base: base}
	rc.visit(tree.Node)
	if rc.err != nil {
		return nil, rc.err
	}
	if n, at := estimateCost(tree.Node); n > MaxIterations {
		return nil, tooExpensive(base+byteOffset(src, at.Location().From), "about %s closure iterations (limit %d)", approx(n), MaxIterations)
	}
	lits := stringLits{}
	ast.Walk(&tree.Node, lits)
	rewrite(&tree.Node)
	if _, err := new(checker.Checker).PatchAndCheck(tree, cfg); err != nil {
		return nil, toCompileError(err, src, base)
	}
	if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
		return nil, toCompileError(err, src, base)
	}
	prog, err := compiler.Compile(tree, cfg)
	if err != nil {
		return nil, toCompileError(err, src, base)
	}
	p := &Program{src: src, prog: prog, refs: dedupRefs(rc.refs), status: rc.status, result: rc.result, errRef: rc.errRef, lits: lits}
	for _, r := range p.refs {
		p.secret = p.secret || r.Kind == "secret"
	}
	return p, nil
}

// newConfig builds the expr-lang configuration of one compile: the env
// struct, our functions, the builtins they replace, and the node limit.
func newConfig() *conf.Config {
	c := conf.CreateNew()
	c.WithEnv(&evalEnv{})
	c.MaxNodes = MaxNodes
	for _, name := range replacedBuiltins {
		c.Disabled[name] = true
		delete(c.Builtins, name)
	}
	for name, fn := range hiddenFuncs {
		c.Functions[name] = fn
	}
	c.Visitors = append(c.Visitors, addPatcher{})
	c.Check()
	return c
}

func toCompileError(err error, src string, base int) *CompileError {
	var fe *file.Error
	if errors.As(err, &fe) {
		if strings.Contains(fe.Message, "exceeds maximum allowed nodes") { // expr-lang's parser, at MaxNodes
			return tooExpensive(base, "more than %d syntax nodes", MaxNodes)
		}
		return &CompileError{Offset: base + byteOffset(src, fe.From), Msg: cleanMsg(fe.Message)}
	}
	return &CompileError{Offset: base, Msg: cleanMsg(err.Error())}
}

// tooExpensive is the compile error of a bound of doc.go hit at offset.
func tooExpensive(offset int, format string, args ...any) *CompileError {
	return &CompileError{Offset: offset, Msg: fmt.Sprintf("%v: %s", ErrTooExpensive, fmt.Sprintf(format, args...)), err: ErrTooExpensive}
}

// cleanMsg removes the hidden names this package rewrites calls to.
func cleanMsg(s string) string {
	if !strings.Contains(s, "__") {
		return s
	}
	s = strings.ReplaceAll(s, "__rt, ", "")
	for name := range hiddenFuncs {
		s = strings.ReplaceAll(s, name, name[2:])
	}
	return s
}

// byteOffset converts a rune offset of src (expr-lang locations count
// runes) to a byte offset.
func byteOffset(src string, runes int) int {
	if runes <= 0 {
		return 0
	}
	i := 0
	for n := 0; n < runes && i < len(src); n++ {
		_, size := utf8.DecodeRuneInString(src[i:])
		i += size
	}
	return i
}

// Eval runs the program.
func (p *Program) Eval(s *Scope) (any, error) {
	if s == nil {
		s = &Scope{}
	}
	ctx := ctxPool.Get().(*evalCtx)
	ctx.bind(s)
	out, err := ctx.vm.Run(p.prog, &ctx.env)
	ctx.release()
	if err != nil {
		return nil, p.runError(err)
	}
	switch out.(type) {
	case bool, string, int, float64, nil:
		return out, nil
	}
	v, err := normalize(out)
	if err != nil {
		return nil, &EvalError{Expr: p.src, Msg: err.Error(), err: err}
	}
	return v, nil
}

// EvalBool runs the program and requires a boolean.
func (p *Program) EvalBool(s *Scope) (bool, error) {
	out, err := p.Eval(s)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, &EvalError{Expr: p.src, Msg: fmt.Sprintf("expected a boolean, got %s", jsonvalue.Kind(out))}
	}
	return b, nil
}

// Refs lists the program's references.
func (p *Program) Refs() []Ref { return append([]Ref(nil), p.refs...) }

// UsesStatusFunc reports whether the program calls success(), failure(),
// always() or cancelled() (an `if` without one gets an implicit success()).
func (p *Program) UsesStatusFunc() bool { return p.status }

// String returns the expression source.
func (p *Program) String() string { return p.src }

// EvalError is a run-time error of an expression. It wraps the error of
// a function, and ErrTooExpensive when a bound was hit.
type EvalError struct {
	Expr string
	Msg  string
	err  error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("evaluate %q: %s", shorten(strings.TrimSpace(e.Expr), 80), e.Msg)
}

func (e *EvalError) Unwrap() error { return e.err }

func (p *Program) runError(err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		msg := fe.Message
		if fe.Prev != nil {
			msg = fe.Prev.Error()
		}
		if strings.Contains(msg, "memory budget exceeded") {
			return &EvalError{Expr: p.src, Msg: fmt.Sprintf("%v: memory budget of %d exceeded", ErrTooExpensive, MemoryBudget), err: ErrTooExpensive}
		}
		return &EvalError{Expr: p.src, Msg: cleanMsg(msg), err: fe.Prev}
	}
	return &EvalError{Expr: p.src, Msg: cleanMsg(err.Error()), err: err}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// evalEnv is the environment struct every program is compiled against.
// Names starting with "__" are reachable only through rewritten calls.
type evalEnv struct {
	Inputs    map[string]any        `expr:"inputs"`
	Steps     map[string]*StepState `expr:"steps"`
	Env       map[string]string     `expr:"env"`
	Secrets   map[string]string     `expr:"secrets"`
	Trigger   map[string]any        `expr:"trigger"`
	Run       *RunInfo              `expr:"run"`
	Item      any                   `expr:"item"`
	Index     int                   `expr:"index"`
	Result    map[string]any        `expr:"result"`
	Error     *ErrorInfo            `expr:"error"`
	RT        *evalState            `expr:"__rt"`
	Success   bool                  `expr:"__success"`
	Failure   bool                  `expr:"__failure"`
	Cancelled bool                  `expr:"__cancelled"`
}

// evalState is the per-evaluation state the guard functions count in.
type evalState struct {
	scope  *Scope
	ticks  int
	start  time.Time
	bytes  int
	now    time.Time
	hasNow bool
}

func (rt *evalState) Now() time.Time {
	if !rt.hasNow {
		if rt.scope != nil && rt.scope.Now != nil {
			rt.now = rt.scope.Now()
		} else {
			rt.now = time.Now()
		}
		rt.hasNow = true
	}
	return rt.now
}

// grow accounts n bytes of built strings.
func (rt *evalState) grow(n int) error {
	rt.bytes += n
	if n < 0 || rt.bytes > MaxOutputBytes {
		return fmt.Errorf("%w: builds more than %d bytes of strings", ErrTooExpensive, MaxOutputBytes)
	}
	return nil
}

type evalCtx struct {
	env evalEnv
	rt  evalState
	vm  vm.VM
}

var ctxPool = sync.Pool{New: func() any { return &evalCtx{vm: vm.VM{MemoryBudget: MemoryBudget}} }}

func (c *evalCtx) bind(s *Scope) {
	c.rt = evalState{scope: s}
	c.env = evalEnv{
		Inputs:    s.Inputs,
		Steps:     s.Steps,
		Env:       s.Env,
		Secrets:   s.Secrets,
		Trigger:   s.Trigger,
		Run:       &s.Run,
		Result:    s.Result,
		Error:     s.Error,
		RT:        &c.rt,
		Success:   !s.Failed && !s.Cancelled,
		Failure:   s.Failed,
		Cancelled: s.Cancelled,
	}
	if s.HasItem {
		c.env.Item, c.env.Index = s.Item, s.Index
	}
	c.vm.MemoryBudget = MemoryBudget
}

func (c *evalCtx) release() {
	c.env = evalEnv{}
	c.rt = evalState{}
	ctxPool.Put(c)
}

var _ ast.Node = (*ast.IdentifierNode)(nil)
