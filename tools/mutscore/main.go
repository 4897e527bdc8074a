// Command mutscore reads the output of `gremlins unleash` (standard input or
// the files named) and prints the mutation score per file and for the whole
// run: killed / (killed + lived). Timed-out, not covered and not viable
// mutants do not count, as in gremlins' own efficacy figure. With -lived it
// also lists the surviving mutants, the ones a new test should kill.
//
//	make mutate PKG=./internal/engine | tee /tmp/engine.log
//	go run ./tools/mutscore -lived /tmp/engine.log
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
)

// line matches one mutant of gremlins' report, e.g.
// "      KILLED CONDITIONALS_NEGATION at step.go:398:20".
var line = regexp.MustCompile(`^\s*(KILLED|LIVED|TIMED OUT|NOT COVERED|NOT VIABLE|SKIPPED)\s+(\S+) at (\S+?):(\d+):(\d+)`)

type tally struct{ killed, lived, other int }

func (t tally) score() string {
	if t.killed+t.lived == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(t.killed)/float64(t.killed+t.lived))
}

func main() {
	showLived := flag.Bool("lived", false, "list the mutants that lived")
	flag.Parse()
	files := map[string]*tally{}
	var total tally
	var lived []string
	read := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m := line.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			t := files[m[3]]
			if t == nil {
				t = &tally{}
				files[m[3]] = t
			}
			switch m[1] {
			case "KILLED":
				t.killed++
				total.killed++
			case "LIVED":
				t.lived++
				total.lived++
				lived = append(lived, fmt.Sprintf("%s:%s:%s %s", m[3], m[4], m[5], m[2]))
			default:
				t.other++
				total.other++
			}
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintln(os.Stderr, "mutscore:", err)
			os.Exit(1)
		}
	}
	if flag.NArg() == 0 {
		read(os.Stdin)
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutscore:", err)
			os.Exit(1)
		}
		read(f)
		f.Close()
	}
	if total.killed+total.lived+total.other == 0 {
		fmt.Fprintln(os.Stderr, "mutscore: no mutant in the input (is it the output of gremlins unleash?)")
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%-28s %7s %6s %6s %7s\n", "file", "killed", "lived", "other", "score")
	for _, n := range names {
		t := files[n]
		fmt.Printf("%-28s %7d %6d %6d %7s\n", n, t.killed, t.lived, t.other, t.score())
	}
	fmt.Printf("%-28s %7d %6d %6d %7s\n", "total", total.killed, total.lived, total.other, total.score())
	if *showLived {
		fmt.Println()
		for _, l := range lived {
			fmt.Println("LIVED", l)
		}
	}
}
