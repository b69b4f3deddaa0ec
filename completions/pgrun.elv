
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
            cand -t 'Stop the run after DUR (e.g. 30, 1.5, 250ms, 2m, 1h, 1d; 0 = none) [default: none]'
            cand --timeout 'Stop the run after DUR (e.g. 30, 1.5, 250ms, 2m, 1h, 1d; 0 = none) [default: none]'
            cand -s 'First signal of the stop sequence [default: TERM]'
            cand --signal 'First signal of the stop sequence [default: TERM]'
            cand -k 'Grace between that signal and SIGKILL (0: KILL right after it) [default: 10s]'
            cand --kill-after 'Grace between that signal and SIGKILL (0: KILL right after it) [default: 10s]'
            cand --escalate 'The whole stop sequence, SIG/DUR/SIG/DUR/..., e.g. INT/2s/TERM/5s/KILL; a final KILL is implied, a signal with no DUR gets 10s'
            cand -p 'Publish the run: the group id, locked while the run lives'
            cand --pidfile 'Publish the run: the group id, locked while the run lives'
            cand --cancel-file 'The cancel marker [default: PIDFILE.cancel]'
            cand --report 'Write a JSON outcome report to PATH at exit'
            cand --max-output 'Bound COMMAND''s stdout and stderr to SIZE bytes each (e.g. 64K, 1M, 10MB): a longer stream keeps its first and last SIZE/2 bytes around a line `[pgrun: N bytes omitted]`'
            cand --contain 'What is stopped and waited for: group, tree, cgroup or auto [default: tree on Linux, group elsewhere]'
            cand --rlimit 'A limit NAME=SOFT[:HARD] for COMMAND, e.g. nofile=1024 (repeatable)'
            cand --memory-max 'The run''s memory, all members together (cgroup memory.max, no swap)'
            cand --pids-max 'At most N tasks in the run at once (cgroup pids.max)'
            cand --cpus 'CPU bandwidth worth X CPUs, e.g. 0.5 or 2 (cgroup cpu.max)'
            cand --generate 'Print the man page or a shell''s completion script, for packagers'
            cand --preserve-status 'On timeout, exit with COMMAND''s status instead of 124'
            cand --wait-group 'When COMMAND exits, let the rest of its group finish on its own instead of stopping it (a timeout or cancel still applies)'
            cand --no-guard 'Run without the guard that stops the run if pgrun is killed with SIGKILL'
            cand --die-with-parent 'Stop the run as if cancelled when the process that started pgrun dies'
            cand --setsid 'Start COMMAND in a new session instead of a new group (no terminal)'
            cand -v 'Say what pgrun does, one line per action on stderr'
            cand --verbose 'Say what pgrun does, one line per action on stderr'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand cancel 'Stop a run from another process, by its pid file.'
            cand status 'Say whether a run is alive, by its pid file.'
        }
        &'pgrun;cancel'= {
            cand --wait-start 'How long to wait for a pid file to appear'
            cand -t 'Bound the wait for the run to stop; past it, SIGKILL the group'
            cand --timeout 'Bound the wait for the run to stop; past it, SIGKILL the group'
            cand --cancel-file 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]'
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
    ]
    $completions[$command]
}
