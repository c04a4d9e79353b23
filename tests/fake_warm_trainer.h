// A stand-in for hyperpack-trainer's warm mode, for the tests of the executors that use it.
#pragma once

namespace hyperpack::testing {

// A stand-in for `hyperpack-trainer --serve` that speaks hyperpack/warm.h's protocol: each trial
// says which process serves it (and how many it has served), in which folder, with which X; then
// `exit N` ends it with N, `report X` prints {"loss": X} and ends it with 0, and `wait` repeats
// what it is told until a SIGTERM ends the trial.
inline constexpr char kFakeWarmTrainer[] = R"(#!/usr/bin/python3
import json, os, select, signal, socket, sys
ctl = socket.socket(fileno=3)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(int(signal.SIGTERM)))
served = 0
while True:
    msg, fds, _, _ = socket.recv_fds(ctl, 65536, 4)
    if not msg:
        sys.exit(0)
    text = msg.decode()
    if not text.startswith("run ") or len(fds) not in (2, 3):
        for fd in fds:
            os.close(fd)
        continue
    request = json.loads(text[4:])
    served += 1
    stop.clear()
    if request["workdir"]:
        os.chdir(request["workdir"])
    env = dict(e.split("=", 1) for e in request["env"])
    say = lambda line: os.write(fds[0], (line + "\n").encode())
    say(f"served {served} by {os.getpid()} in {os.getcwd()} with X={env.get('X', '')}")
    words = request["argv"][1:]
    end = "exit 0"
    if words[0] == "exit":
        end = "exit " + words[1]
    elif words[0] == "report":
        say('{"loss": %s}' % words[1])
    elif words[0] == "wait":
        while not stop:
            if select.select([ctl], [], [], 0.05)[0]:
                say("told " + ctl.recv(1024).decode().strip())
        end = f"signal {stop[0]}"
    for fd in fds:
        os.close(fd)
    ctl.send(end.encode())
)";

}  // namespace hyperpack::testing
