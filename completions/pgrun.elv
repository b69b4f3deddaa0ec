
use builtin;
use str;

set edit:completion:arg-completer[pgrun] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'pgrun'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'pgrun'= {
            cand -t 'Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none)'
            cand --timeout 'Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none)'
            cand --idle-timeout 'Stop the run when COMMAND has written no output for DUR'
            cand -s 'First signal of the stop sequence [default: TERM]'
            cand --signal 'First signal of the stop sequence [default: TERM]'
            cand -k 'Grace between that signal and SIGKILL [default: 10s]'
            cand --kill-after 'Grace between that signal and SIGKILL [default: 10s]'
            cand --escalate 'The whole stop sequence, e.g. INT/2s/TERM/5s/KILL'
            cand -p 'Publish the run: the group id, locked while the run lives'
            cand --pidfile 'Publish the run: the group id, locked while the run lives'
            cand --cancel-file 'The cancel marker [default: PIDFILE.cancel]'
            cand --report 'Write a JSON outcome report to PATH at exit'
            cand --max-output 'Bound stdout and stderr to SIZE bytes each (64K, 1M): head and tail'
            cand --output-file 'Also write stdout and stderr, complete and in read order, to PATH'
            cand --contain 'What is stopped: group, tree, cgroup or auto [default: tree on Linux]'
            cand --detach-after 'Wait as for any run, but hand the run off after DUR (exit 122)'
            cand --rlimit 'A limit NAME=SOFT[:HARD] for COMMAND, e.g. nofile=1024 (repeatable)'
            cand --memory-max 'The run''s memory, all members together (cgroup memory.max, no swap)'
            cand --pids-max 'At most N tasks in the run at once (cgroup pids.max)'
            cand --cpus 'CPU bandwidth worth X CPUs, e.g. 0.5 or 2 (cgroup cpu.max)'
            cand --generate 'Print a man page or a shell''s completion script and exit'
            cand --preserve-status 'On timeout (or idle timeout), exit with COMMAND''s status instead of 124'
            cand --wait-group 'When COMMAND exits, let the rest of its group finish on its own'
            cand --no-guard 'Run without the guard that stops the run if pgrun is killed with SIGKILL'
            cand --die-with-parent 'Stop the run as if cancelled when the process that started pgrun dies'
            cand --detach 'Return once the run is published; it lives on in a session of its own'
            cand --stdin-pipe 'COMMAND''s stdin is a pipe pgrun holds open: write to it with `pgrun send`'
            cand --setsid 'Start COMMAND in a new session instead of a new group (no terminal)'
            cand -v 'Say what pgrun does, one line per action on stderr'
            cand --verbose 'Say what pgrun does, one line per action on stderr'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand cancel 'Stop a run from another process, by its pid file.'
            cand status 'Say whether a run is alive, by its pid file.'
            cand wait 'Wait for a run to be over, by its pid file.'
            cand output 'Read a window of a run''s output file, from byte N.'
            cand ls 'List the runs published in a folder.'
            cand send 'Write to a run''s stdin pipe (--stdin-pipe).'
        }
        &'pgrun;cancel'= {
            cand --wait-start 'How long to wait for a pid file to appear'
            cand -t 'Bound the wait for the run to stop; past it, SIGKILL the group'
            cand --timeout 'Bound the wait for the run to stop; past it, SIGKILL the group'
            cand --cancel-file 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]'
            cand --report 'The run''s report (the PATH it was given): a run over answers at once (exit 1)'
            cand --keep-pending 'If no run appears, leave the marker so the run is cancelled when it starts'
            cand --no-wait 'Return as soon as the request is delivered'
            cand --force 'Stop the group named by a stale pid file (nobody holds its lock)'
            cand -v 'Say what cancel does, on stderr'
            cand --verbose 'Say what cancel does, on stderr'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'pgrun;status'= {
            cand --cancel-file 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]'
            cand --json 'Print one JSON object instead of a line'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'pgrun;wait'= {
            cand --wait-start 'How long to wait for a pid file to appear'
            cand -t 'Give up after DUR (exit 124), leaving the run alone'
            cand --timeout 'Give up after DUR (exit 124), leaving the run alone'
            cand --report 'The run''s report (the PATH it was given): exit with the run''s own status'
            cand --ready 'Wait until a process of the run listens on TCP port PORT (any port without one), not for its end: 0 ready, 1 the run was over first'
            cand -v 'Say what wait does, on stderr'
            cand --verbose 'Say what wait does, on stderr'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'pgrun;output'= {
            cand --since 'Start the window at byte N of FILE'
            cand --max 'At most SIZE bytes from N on (at least 4) [default: 64K]'
            cand --tail 'The last SIZE bytes past N instead (at least 4)'
            cand --wait 'Wait up to DUR for bytes past N, or the run''s end (with --pidfile)'
            cand --until 'With --wait: wait for a line past N that matches REGEX'
            cand --pidfile 'The pid file of the run that writes FILE: say, and wait for, its end'
            cand --json 'Print one JSON object instead of the window''s bytes'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'pgrun;ls'= {
            cand --json 'Print one JSON array of status --json objects instead of lines'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'pgrun;send'= {
            cand --file 'Send the bytes of FILE instead of TEXT'
            cand -t 'Give up (exit 124) when COMMAND has read nothing for DUR'
            cand --timeout 'Give up (exit 124) when COMMAND has read nothing for DUR'
            cand --eof 'Then close the pipe: COMMAND reads end-of-file (alone: only close it)'
            cand -v 'Say what send does, on stderr'
            cand --verbose 'Say what send does, on stderr'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
    ]
    $completions[$command]
}
