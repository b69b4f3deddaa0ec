
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'pgrun' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'pgrun'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'pgrun' {
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none)')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'Stop the run when COMMAND has written no output for DUR')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'First signal of the stop sequence [default: TERM]')
            [CompletionResult]::new('--signal', '--signal', [CompletionResultType]::ParameterName, 'First signal of the stop sequence [default: TERM]')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Grace between that signal and SIGKILL [default: 10s]')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace between that signal and SIGKILL [default: 10s]')
            [CompletionResult]::new('--escalate', '--escalate', [CompletionResultType]::ParameterName, 'The whole stop sequence, e.g. INT/2s/TERM/5s/KILL')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Publish the run: the group id, locked while the run lives')
            [CompletionResult]::new('--pidfile', '--pidfile', [CompletionResultType]::ParameterName, 'Publish the run: the group id, locked while the run lives')
            [CompletionResult]::new('--cancel-file', '--cancel-file', [CompletionResultType]::ParameterName, 'The cancel marker [default: PIDFILE.cancel]')
            [CompletionResult]::new('--report', '--report', [CompletionResultType]::ParameterName, 'Write a JSON outcome report to PATH at exit')
            [CompletionResult]::new('--max-output', '--max-output', [CompletionResultType]::ParameterName, 'Bound stdout and stderr to SIZE bytes each (64K, 1M): head and tail')
            [CompletionResult]::new('--output-file', '--output-file', [CompletionResultType]::ParameterName, 'Also write stdout and stderr, complete and in read order, to PATH')
            [CompletionResult]::new('--contain', '--contain', [CompletionResultType]::ParameterName, 'What is stopped: group, tree, cgroup or auto [default: tree on Linux]')
            [CompletionResult]::new('--detach-after', '--detach-after', [CompletionResultType]::ParameterName, 'Wait as for any run, but hand the run off after DUR (exit 122)')
            [CompletionResult]::new('--rlimit', '--rlimit', [CompletionResultType]::ParameterName, 'A limit NAME=SOFT[:HARD] for COMMAND, e.g. nofile=1024 (repeatable)')
            [CompletionResult]::new('--memory-max', '--memory-max', [CompletionResultType]::ParameterName, 'The run''s memory, all members together (cgroup memory.max, no swap)')
            [CompletionResult]::new('--pids-max', '--pids-max', [CompletionResultType]::ParameterName, 'At most N tasks in the run at once (cgroup pids.max)')
            [CompletionResult]::new('--cpus', '--cpus', [CompletionResultType]::ParameterName, 'CPU bandwidth worth X CPUs, e.g. 0.5 or 2 (cgroup cpu.max)')
            [CompletionResult]::new('--generate', '--generate', [CompletionResultType]::ParameterName, 'Print a man page or a shell''s completion script and exit')
            [CompletionResult]::new('--preserve-status', '--preserve-status', [CompletionResultType]::ParameterName, 'On timeout (or idle timeout), exit with COMMAND''s status instead of 124')
            [CompletionResult]::new('--wait-group', '--wait-group', [CompletionResultType]::ParameterName, 'When COMMAND exits, let the rest of its group finish on its own')
            [CompletionResult]::new('--no-guard', '--no-guard', [CompletionResultType]::ParameterName, 'Run without the guard that stops the run if pgrun is killed with SIGKILL')
            [CompletionResult]::new('--die-with-parent', '--die-with-parent', [CompletionResultType]::ParameterName, 'Stop the run as if cancelled when the process that started pgrun dies')
            [CompletionResult]::new('--detach', '--detach', [CompletionResultType]::ParameterName, 'Return once the run is published; it lives on in a session of its own')
            [CompletionResult]::new('--stdin-pipe', '--stdin-pipe', [CompletionResultType]::ParameterName, 'COMMAND''s stdin is a pipe pgrun holds open: write to it with `pgrun send`')
            [CompletionResult]::new('--setsid', '--setsid', [CompletionResultType]::ParameterName, 'Start COMMAND in a new session instead of a new group (no terminal)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say what pgrun does, one line per action on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say what pgrun does, one line per action on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('cancel', 'cancel', [CompletionResultType]::ParameterValue, 'Stop a run from another process, by its pid file.')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Say whether a run is alive, by its pid file.')
            [CompletionResult]::new('wait', 'wait', [CompletionResultType]::ParameterValue, 'Wait for a run to be over, by its pid file.')
            [CompletionResult]::new('output', 'output', [CompletionResultType]::ParameterValue, 'Read a window of a run''s output file, from byte N.')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the runs published in a folder.')
            [CompletionResult]::new('send', 'send', [CompletionResultType]::ParameterValue, 'Write to a run''s stdin pipe (--stdin-pipe).')
            break
        }
        'pgrun;cancel' {
            [CompletionResult]::new('--wait-start', '--wait-start', [CompletionResultType]::ParameterName, 'How long to wait for a pid file to appear')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Bound the wait for the run to stop; past it, SIGKILL the group')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Bound the wait for the run to stop; past it, SIGKILL the group')
            [CompletionResult]::new('--cancel-file', '--cancel-file', [CompletionResultType]::ParameterName, 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]')
            [CompletionResult]::new('--report', '--report', [CompletionResultType]::ParameterName, 'The run''s report (the PATH it was given): a run over answers at once (exit 1)')
            [CompletionResult]::new('--keep-pending', '--keep-pending', [CompletionResultType]::ParameterName, 'If no run appears, leave the marker so the run is cancelled when it starts')
            [CompletionResult]::new('--no-wait', '--no-wait', [CompletionResultType]::ParameterName, 'Return as soon as the request is delivered')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Stop the group named by a stale pid file (nobody holds its lock)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say what cancel does, on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say what cancel does, on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'pgrun;status' {
            [CompletionResult]::new('--cancel-file', '--cancel-file', [CompletionResultType]::ParameterName, 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of a line')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'pgrun;wait' {
            [CompletionResult]::new('--wait-start', '--wait-start', [CompletionResultType]::ParameterName, 'How long to wait for a pid file to appear')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Give up after DUR (exit 124), leaving the run alone')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up after DUR (exit 124), leaving the run alone')
            [CompletionResult]::new('--report', '--report', [CompletionResultType]::ParameterName, 'The run''s report (the PATH it was given): exit with the run''s own status')
            [CompletionResult]::new('--ready', '--ready', [CompletionResultType]::ParameterName, 'Wait until a process of the run listens on TCP port PORT (any port without one), not for its end: 0 ready, 1 the run was over first')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say what wait does, on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say what wait does, on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'pgrun;output' {
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Start the window at byte N of FILE')
            [CompletionResult]::new('--max', '--max', [CompletionResultType]::ParameterName, 'At most SIZE bytes from N on (at least 4) [default: 64K]')
            [CompletionResult]::new('--tail', '--tail', [CompletionResultType]::ParameterName, 'The last SIZE bytes past N instead (at least 4)')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DUR for bytes past N, or the run''s end (with --pidfile)')
            [CompletionResult]::new('--until', '--until', [CompletionResultType]::ParameterName, 'With --wait: wait for a line past N that matches REGEX')
            [CompletionResult]::new('--pidfile', '--pidfile', [CompletionResultType]::ParameterName, 'The pid file of the run that writes FILE: say, and wait for, its end')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the window''s bytes')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'pgrun;ls' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON array of status --json objects instead of lines')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'pgrun;send' {
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'Send the bytes of FILE instead of TEXT')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Give up (exit 124) when COMMAND has read nothing for DUR')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up (exit 124) when COMMAND has read nothing for DUR')
            [CompletionResult]::new('--eof', '--eof', [CompletionResultType]::ParameterName, 'Then close the pipe: COMMAND reads end-of-file (alone: only close it)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Say what send does, on stderr')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Say what send does, on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
