package playbook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/expr"
)

// hostile is a value written to run code wherever the shell would read it
// as script text: command separators, substitutions, quotes of both kinds,
// a glob, a newline and a backslash.
const hostile = "x; touch pwned; echo $(touch pwned2) `touch pwned3` ' \" * \\ \n$((1+1)) end"

// TestShellScriptValuesAreData rewrites scripts with a ${{ }} in every
// quoting context, runs them with /bin/sh and the variable set to a hostile
// value, and checks the value is printed as written and nothing ran.
func TestShellScriptValuesAreData(t *testing.T) {
	cases := []struct {
		name, script, want string
	}{
		{"an unquoted word prints the value", `printf '%s|' ${{ inputs.who }}`, hostile + "|"},
		{"a word inside double quotes prints the value", `printf '%s|' "<${{ inputs.who }}>"`, "<" + hostile + ">|"},
		{"a word inside single quotes prints the value", `printf '%s|' 'a ${{ inputs.who }} b'`, "a " + hostile + " b|"},
		{"a word next to text prints the value", `printf '%s|' pre-${{ inputs.who }}-post`, "pre-" + hostile + "-post|"},
		{"a command substitution prints the value", `printf '%s|' "$(printf %s ${{ inputs.who }})"`, hostile + "|"},
		{"backquotes print the value", "printf '%s|' `printf %s ${{ inputs.who }}`", strings.Join(strings.Fields(hostile), "|") + "|"},
		{"backquotes inside double quotes print the value", "printf '%s|' \"`printf %s ${{ inputs.who }}`\"", hostile + "|"},
		{"an assignment keeps the value", `v=${{ inputs.who }}; printf '%s|' "$v"`, hostile + "|"},
		{"an escaped quote stays a character", `printf '%s|' \"${{ inputs.who }}\"`, `"` + hostile + `"|`},
		{"a here-document prints the value", "cat <<EOF\n<${{ inputs.who }}>\nEOF\nprintf done", "<" + hostile + ">\ndone"},
		{"a here-document with <<- prints the value", "cat <<-EOF\n\t<${{ inputs.who }}>\n\tEOF\nprintf done", "<" + hostile + ">\ndone"},
		{"a comment is not run", "printf a # ${{ inputs.who }}\nprintf b", "ab"},
		{"two parts of one expression share a variable", `printf '%s|' ${{ inputs.who }} "${{ inputs.who }}"`, hostile + "|" + hostile + "|"},
		{"a literal $${{ stays literal", `printf '%s|' '$${{ x }}' ${{ inputs.who }}`, "${{ x }}|" + hostile + "|"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts, err := expr.SplitTemplate(c.script)
			require.NoError(t, err)
			text, vars, refused := rewriteShell(parts, func(string) bool { return false })
			require.Empty(t, refused)
			require.Len(t, vars, 1)
			assert.Equal(t, "RB_INPUTS_WHO", vars[0].Name)
			assert.Equal(t, "inputs.who", vars[0].Expr)
			assert.NotContains(t, text, "inputs.who")
			// The rewritten text is a template again: its literal ${{ is
			// written $${{.
			lit, err := expr.CompileTemplate(text, nil)
			require.NoError(t, err)
			require.True(t, lit.Literal())
			script, _ := lit.Eval(nil)

			dir := t.TempDir()
			cmd := exec.Command("/bin/sh", "-c", script.(string))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "RB_INPUTS_WHO="+hostile)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "script %q: %s", script, out)
			assert.Equal(t, c.want, strings.TrimSuffix(string(out), "\n"), "script %q", script)
			for _, f := range []string{"pwned", "pwned2", "pwned3"} {
				assert.NoFileExists(t, filepath.Join(dir, f), "the value ran as code")
			}
		})
	}
}

func TestShellScriptPartsThatCannotBeKept(t *testing.T) {
	cases := []struct{ name, script, why string }{
		{"arithmetic", `echo $(( ${{ inputs.n }} + 1 ))`, "$(( ))"},
		{"arithmetic inside double quotes", `echo "$(( ${{ inputs.n }} * 2 ))"`, "$(( ))"},
		{"a here-document with a quoted delimiter", "cat <<'EOF'\n${{ inputs.n }}\nEOF", "quoted delimiter"},
		{"a here-document with an escaped delimiter", "cat <<\\EOF\n${{ inputs.n }}\nEOF", "quoted delimiter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts, err := expr.SplitTemplate(c.script)
			require.NoError(t, err)
			_, _, refused := rewriteShell(parts, func(string) bool { return false })
			require.Len(t, refused, 1)
			assert.Contains(t, refused[0].Why, c.why)
			assert.Equal(t, strings.Index(c.script, "${{"), refused[0].Offset)
		})
	}
}

func TestShellVariableNames(t *testing.T) {
	taken := map[string]bool{"RB_INPUTS_WHO": true}
	parts, err := expr.SplitTemplate(`echo ${{ inputs.who }} ${{ inputs.a + "b" }} ${{ item }}`)
	require.NoError(t, err)
	_, vars, _ := rewriteShell(parts, func(n string) bool { return taken[n] })
	require.Len(t, vars, 3)
	assert.Equal(t, "RB_INPUTS_WHO_2", vars[0].Name, "a name the env already has gets a suffix")
	assert.Equal(t, "RB_2", vars[1].Name, "an expression that is not a reference is numbered")
	assert.Equal(t, "RB_ITEM", vars[2].Name)
}

// TestAUserScriptGetsItsValuesAsVariablesAtItsTop loads playbooks whose
// node user scripts (run by the node's shell, not by runbook) hold a
// ${{ }}, evaluates the param as the engine does with a hostile input and
// runs the script: the value is printed as written and nothing else runs.
func TestAUserScriptGetsItsValuesAsVariablesAtItsTop(t *testing.T) {
	script := `#!/bin/bash
echo "hello ${{ inputs.who }}" > out.txt
echo ${{ inputs.who }} >> out.txt
`
	cases := []struct{ name, step, param string }{
		{"nks.nodegroup.userscript contents", "uses: nks.nodegroup.userscript\n    with:\n      cluster: prod\n      nodegroup: pool-b\n      contents: |\n", "contents"},
		{"nks.nodegroup.create labels.user_script_v2", "uses: nks.nodegroup.create\n    with:\n      cluster: prod\n      name: pool-b\n      flavor_id: f\n      image_id: i\n      node_count: 1\n      labels:\n        availability_zone: kr-pub-a\n        boot_volume_type: General SSD\n        boot_volume_size: 50\n        user_script_v2: |\n", "labels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			indent := "        "
			if c.param == "labels" {
				indent = "          "
			}
			src := "version: 1\nname: us\ninputs:\n  who: {type: string}\nsteps:\n  - id: s\n    " + c.step +
				indent + strings.ReplaceAll(strings.TrimSuffix(script, "\n"), "\n", "\n"+indent) + "\n"
			pb, err := Parse("us.yaml", []byte(src), LoadOptions{})
			require.NoError(t, err, src)
			v, err := pb.Steps[0].With[c.param].Eval(&expr.Scope{Inputs: map[string]any{"who": hostile}})
			require.NoError(t, err)
			got := v
			if c.param == "labels" {
				got = v.(map[string]any)["user_script_v2"]
			}
			text := got.(string)
			assert.True(t, strings.HasPrefix(text, "#!/bin/bash\nRB_INPUTS_WHO='"), "the variable is set after the #! line:\n%s", text)

			dir := t.TempDir()
			cmd := exec.Command("/bin/bash", "-c", text)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s\n%s", text, out)
			b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
			require.NoError(t, err)
			assert.Equal(t, "hello "+hostile+"\n"+hostile+"\n", string(b))
			for _, f := range []string{"pwned", "pwned2", "pwned3"} {
				assert.NoFileExists(t, filepath.Join(dir, f), "the value ran as code")
			}
		})
	}
	t.Run("a script for another interpreter is refused", func(t *testing.T) {
		src := "version: 1\nname: us\ninputs:\n  who: {type: string}\nsteps:\n  - id: s\n    uses: nks.nodegroup.userscript\n    with:\n      cluster: prod\n      nodegroup: pool-b\n      contents: |\n        #!/usr/bin/python3\n        print('${{ inputs.who }}')\n"
		_, err := Parse("us.yaml", []byte(src), LoadOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "us.yaml:13:16: steps[0].with.contents: ${{ inputs.who }} is in a script run by python3")
	})
}
