#!/usr/bin/env python3
"""A Hermes extension in Python, standard library only: the protocol of docs/protocol.md without Lifeline.

It speaks JSON-RPC 2.0 in Content-Length frames on stdin/stdout (logs go to stderr), answers `initialize`, runs two
commands through `editor/*` and `ui/*`, keeps a counter in `<dataDir>/extensions/py-hl7/state.json` (written to a
temporary file and renamed over it), and runs its cleanup checklist on `shutdown`, at the end of stdin, on SIGTERM and
when the host's pid is gone. Check it with the conformance kit:

    examples/headless-host/bin/hermes-host --conformance --extension "python3 examples/python-extension/extension.py"
"""
import json
import os
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

NAME = "py-hl7"
VERSION = "1.0.0"
COMMANDS = [
    {"id": "py.uppercase-name", "title": "Upper-case the family name"},
    {"id": "py.summary", "title": "Show a summary of the segments"},
]
CALL_TIMEOUT = 5.0  # docs/protocol.md, "Lifecycle": the extension's own calls, 5 s recommended

stdout = sys.stdout.buffer
write_lock = threading.Lock()
lock = threading.RLock()  # guards everything below
calls = {}  # our request id -> [threading.Event, answer]
next_id = 1
windows = {}  # window id -> threading.Event
closed_early = set()  # window/closed may arrive before the answer that names the window
state = {"uppercased": 0, "summaries": 0}
state_file = None
set_aside = None
initialized = False
accepting = True
finished = False


def log(text):
    try:
        sys.stderr.write(f"{NAME}: {text}\n")
        sys.stderr.flush()
    except OSError:
        pass


def send(message):
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    with write_lock:
        try:
            stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)  # the length in bytes, not characters
            stdout.flush()
        except OSError:
            pass  # the host is gone: the end of stdin follows


def answer(id_, result):
    send({"jsonrpc": "2.0", "id": id_, "result": result})


def refuse(id_, code, message, data=None):
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    send({"jsonrpc": "2.0", "id": id_, "error": error})


def call(method, params):
    """A request to the host; gives up after CALL_TIMEOUT (a late answer is then ignored)."""
    global next_id
    with lock:
        if not accepting:
            raise RuntimeError("shutting down")
        id_ = next_id
        next_id += 1
        slot = calls[id_] = [threading.Event(), None]
    send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
    if not slot[0].wait(CALL_TIMEOUT):
        with lock:
            calls.pop(id_, None)
        raise TimeoutError(f"{method}: no answer within {CALL_TIMEOUT} s")
    message = slot[1]
    if message is None or "error" in message:
        raise RuntimeError(f"{method} refused: {message and message.get('error')}")
    return message["result"]


# -- state -----------------------------------------------------------------------------------------------------------

def load_state(data_dir):
    """Reads state.json; a file that cannot be read is moved aside, never overwritten (docs/protocol.md)."""
    global state_file, set_aside, state
    directory = os.path.join(data_dir, "extensions", NAME)
    state_file = os.path.join(directory, "state.json")
    if not os.path.exists(state_file):
        return
    try:
        with open(state_file, encoding="utf-8") as f:
            read = json.load(f)
        if not isinstance(read, dict) or not all(isinstance(read.get(k), int) for k in state):
            raise ValueError("does not match the state's shape")
        state = {k: read[k] for k in state}
    except (OSError, ValueError) as error:
        reason = "Unreadable" if isinstance(error, OSError) else "SchemaMismatch"
        if isinstance(error, json.JSONDecodeError):
            reason = "InvalidJson"
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3] + "Z"
        target = f"{state_file}.bad-{stamp}"
        os.replace(state_file, target)
        set_aside = {"path": target, "reason": reason, "detail": f"{state_file}: {error}"[:500]}
        log(f"state file set aside: {target}")


def save_state():
    """Writes a temporary file in the same directory, flushes it to disk and renames it over state.json."""
    if state_file is None:
        return
    directory = os.path.dirname(state_file)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix="state.json.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, state_file)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def checklist():
    """Stop accepting work, release the waiters (commands give up), persist the state. Answers an error or None."""
    global accepting
    with lock:
        accepting = False
        for slot in calls.values():
            slot[0].set()
        for event in windows.values():
            event.set()
    try:
        with lock:
            save_state()
        return None
    except OSError as error:
        return f"Could not save state: {error}"


def claim_finish():
    """True for the first caller only: the checklist runs once, whichever end comes first."""
    global finished
    with lock:
        first = not finished
        finished = True
        return first


def exit_now(code):
    try:
        stdout.flush()
    except OSError:
        pass
    os._exit(code)


def finish(code=0):
    """The checklist, then the exit: at the end of stdin, on SIGTERM, when the host's pid is gone."""
    if not claim_finish():
        return
    failure = checklist()
    if failure is not None:
        log(failure)
    exit_now(code)


# -- commands --------------------------------------------------------------------------------------------------------

def uppercase_name():
    raw = call("editor/getMessage", {"format": "raw"})["message"]
    pid = next((s for s in raw.replace("\n", "\r").split("\r") if s.startswith("PID|")), None)
    fields = pid.split("|") if pid else []
    family = fields[5].split("^")[0] if len(fields) > 5 else ""
    if family:
        call("editor/patchMessage", {"patches": [{"path": "PID-5.1", "value": family.upper()}]})
    with lock:
        state["uppercased"] += 1


def summary():
    segments = json.loads(call("editor/getMessage", {"format": "json"})["message"])
    text = ", ".join(f"{name} x{len(v) if isinstance(v, list) else 1}" for name, v in segments.items())
    url = "data:text/plain;charset=utf-8," + text.replace(" ", "%20").replace(",", "%2C")
    window_id = call("ui/openWindow", {"url": url, "title": "Segments"})["windowId"]
    with lock:
        event = windows.setdefault(window_id, threading.Event())
        if window_id in closed_early or not accepting:
            closed_early.discard(window_id)
            event.set()
    event.wait()
    with lock:
        windows.pop(window_id, None)
        state["summaries"] += 1


def run_command(command):
    try:
        {"py.uppercase-name": uppercase_name, "py.summary": summary}[command]()
        log(f"{command} done")
    except Exception as error:  # a command's failure is logged: nobody waits for an answer
        log(f"{command} failed: {error}")


# -- the protocol ----------------------------------------------------------------------------------------------------

def watch_host(pid):
    """docs/protocol.md, "The host's pid": once the host is gone, run the checklist and exit."""
    def alive():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:
            with open(f"/proc/{pid}/stat", encoding="latin-1") as f:
                stat = f.read()
            return stat[stat.rindex(")") + 2] not in "ZX"  # a zombie is gone
        except OSError:
            return True

    while alive():
        time.sleep(0.25)
    log(f"the host (pid {pid}) is gone")
    finish(0)


def initialize(id_, params):
    global initialized
    if initialized:
        return refuse(id_, -32600, "Invalid Request", "initialize: the handshake has already completed")
    params = {} if params is None else params
    typed = isinstance(params, dict) and all(
        isinstance(params.get(k, ""), str) for k in ("hermesVersion", "protocolVersion", "dataDir")
    ) and (type(params.get("hostPid", 0)) is int)
    if not typed:
        return refuse(id_, -32602, "Invalid params", "hostPid must be an integer, the others strings")
    # `settings`, the user's settings (a JSON object): this extension has none of its own, so it reads past them.
    # A host sends them again, changed, by restarting the extension (shutdown with reason "reload", then initialize).
    if isinstance(params.get("settings"), dict):
        log(f"settings ignored: {len(params['settings'])} key(s)")
    data_dir = params.get("dataDir") or os.environ.get("HERMES_DATA_DIR") or os.path.expanduser("~/.hermes")
    with lock:
        load_state(data_dir)
        initialized = True
    if params.get("hostPid", 0) > 0:
        threading.Thread(target=watch_host, args=(params["hostPid"],), daemon=True).start()
    answer(id_, {"name": NAME, "version": VERSION, "commands": COMMANDS})


def shutdown(id_, params):
    reason = params.get("reason") if isinstance(params, dict) else None
    if reason not in (None, "closing", "disabled", "reload", "error"):
        log(f"unknown shutdown reason {json.dumps(str(reason)[:200])}: as closing")
    if not claim_finish():
        return
    failure = checklist()
    if failure is not None:
        refuse(id_, -32000, "Shutdown failed", failure)
    else:
        answer(id_, {"success": True, "data": {"stateSetAside": set_aside}} if set_aside else {"success": True})
    exit_now(0)  # answered: the extension exits (docs/protocol.md, "shutdown")


def on_message(message):
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return refuse(None, -32600, "Invalid Request")
    if "method" not in message and ("result" in message or "error" in message):
        with lock:
            slot = calls.pop(message.get("id"), None)  # None: a late answer to a call that gave up, ignored
        if slot is not None:
            slot[1] = message
            slot[0].set()
        return
    method = message.get("method")
    if not isinstance(method, str):
        return refuse(message.get("id") if isinstance(message.get("id"), (str, int)) else None, -32600,
                      "Invalid Request", "the method must be a string")
    params = message.get("params")
    if "id" in message:
        id_ = message["id"]
        if method == "initialize":
            return initialize(id_, params)
        if not initialized:
            return refuse(id_, -32002, "Server not initialized")
        if method == "shutdown":
            return shutdown(id_, params)
        return refuse(id_, -32601, f"Method not found: {method}")
    if method == "command/execute" and isinstance(params, dict):
        command = params.get("command")
        with lock:
            ok = initialized and accepting and command in ("py.uppercase-name", "py.summary")
        if ok:
            threading.Thread(target=run_command, args=(command,), daemon=True).start()
        else:
            log(f"command ignored: {json.dumps(str(command)[:200])}")
    elif method == "window/closed" and isinstance(params, dict):
        with lock:
            event = windows.get(params.get("windowId"))
            if event is not None:
                event.set()
            elif len(closed_early) < 1024:
                closed_early.add(params.get("windowId"))


def read_frames(stdin):
    """Yields each frame's body; returns at the end of stdin."""
    while True:
        length = None
        while True:
            line = stdin.readline()
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length" and value.strip().isdigit():
                length = int(value.strip())
        if length is None:
            continue
        body = stdin.read(length)
        if len(body) < length:
            return
        yield body


def main():
    signal.signal(signal.SIGTERM, lambda *_: finish(143))
    for body in read_frames(sys.stdin.buffer):
        try:
            message = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            refuse(None, -32700, "Parse error", str(error)[:200])
            continue
        on_message(message)
    finish(0)  # the end of stdin: the host is gone


if __name__ == "__main__":
    main()
