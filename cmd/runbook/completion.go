package main

import (
	"context"
	"fmt"
)

var completionVerb = &verb{
	name:    "completion",
	summary: "print the shell completion script for bash, zsh or fish",
	run:     cmdCompletion,
}

func cmdCompletion(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "__complete" {
		// the scripts' callback: candidates for the last word
		for _, c := range complete(ctx, args[1:]) {
			fmt.Fprintln(a.stdout, c)
		}
		return nil
	}
	fs := newFlagSet(a, command{
		name: "completion", usage: "bash|zsh|fish",
		summary: "Print the script that completes runbook's commands, flags, step types and run IDs (read from the state) in a shell.",
		details: `Load it in the shell's startup file:
  bash:  source <(runbook completion bash)          (in ~/.bashrc)
  zsh:   source <(runbook completion zsh)           (in ~/.zshrc, after compinit)
  fish:  runbook completion fish | source           (in ~/.config/fish/config.fish)
The script asks 'runbook completion __complete WORDS...' for the candidates,
so it follows the runbook found on PATH.`,
	})
	pos, err := parsePositional(fs, args, 1, 1, "the shell: bash, zsh or fish")
	if err != nil {
		return err
	}
	script, ok := completionScripts[pos[0]]
	if !ok {
		return usageErrorf("completion", "unknown shell %q (bash, zsh, fish)", pos[0])
	}
	_, err = fmt.Fprint(a.stdout, script)
	return err
}

var completionScripts = map[string]string{
	"bash": `# runbook completion for bash: source <(runbook completion bash)
_runbook() {
    local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
    local -a out
    out=($(runbook completion __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
    if [[ "${out[0]}" == ":files" ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
    else
        COMPREPLY=($(compgen -W "${out[*]}" -- "$cur"))
    fi
}
complete -F _runbook runbook
`,
	"zsh": `#compdef runbook
# runbook completion for zsh: source <(runbook completion zsh), after compinit
_runbook() {
    local -a out
    out=("${(@f)$(runbook completion __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ "${out[1]}" == ":files" ]]; then
        _files
    else
        compadd -a out
    fi
}
if [[ "${funcstack[1]}" == "_runbook" ]]; then
    _runbook "$@"
else
    compdef _runbook runbook
fi
`,
	"fish": `# runbook completion for fish: runbook completion fish | source
function __runbook_complete
    set -l words (commandline -opc) (commandline -ct)
    set -e words[1]
    set -l out (runbook completion __complete $words 2>/dev/null)
    if test "$out[1]" = ":files"
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out
    end
end
complete -c runbook -f -a '(__runbook_complete)'
`,
}
