"""A resident evaluator for benchmark trials: one process imports the heavy libraries and loads
the data once, then forks per request, so that a trial costs its own work and not Python's imports.

The protocol is one JSON line each way over a Unix socket: the request is {KEY: name, "params":
{...}}, the reply {"loss": x}, or {"error": "..."} where the loss function raised (a configuration
the estimator refuses). Used by bayesmark.py (KEY "problem") and sklearn_tasks.py (KEY "task").
"""
import json
import os
import socket
import socketserver


def serve(path, key, loss):
    """Serves loss(name, params) at the Unix socket `path` until killed; prints "ready" once
    listening. Warm loss up before calling, so that the forks inherit what it loaded."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            request = json.loads(self.rfile.readline())
            try:
                reply = {"loss": loss(request[key], request["params"])}
            except Exception as e:  # a configuration the estimator refuses
                reply = {"error": f"{type(e).__name__}: {e}"}
            self.wfile.write((json.dumps(reply) + "\n").encode())

    class Server(socketserver.ForkingMixIn, socketserver.UnixStreamServer):
        pass

    if os.path.exists(path):
        os.unlink(path)
    with Server(path, Handler) as s:
        print("ready", flush=True)
        s.serve_forever()


def request(path, key, name, params):
    """The evaluator's reply at `path` for `params` of `name`: {"loss": x} or {"error": "..."}."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall((json.dumps({key: name, "params": params}) + "\n").encode())
        return json.loads(s.makefile().readline())
