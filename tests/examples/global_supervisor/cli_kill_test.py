#!/usr/bin/env python3
"""The command line's kill loop (issue 23, break 2): a user's chat / resume / chat sequence on the
Global Supervisor, each call its own process, SIGKILLed at random moments, the user going on
with the next command (or repeating one that left no trace). After every call the thread reads
back (`state --json`); after every call that was not killed the turn is finished: a turn a
killed call left (`pending`: steps to run, no question waiting) is finished by the next chat or
resume (its `recovered` nodes), never left pending and never dropped. Once the answer to the
disambiguation question was taken (a checkpoint of disambiguation_blocking), the fact is stored
for the chosen contact and the confirmation is in the chat's messages by the round's end.

  cli_kill_test.py path/to/global_supervisor
  STATEGRAPH_CLI_KILLS=<n> kills (default 24), STATEGRAPH_KILL_SEED=<seed>,
  STATEGRAPH_CLI_KILL_SECONDS=<s> time for the rounds (default 150; the test's limit is 300).
Every loop is bounded: the kill count, the time (a slow machine, or a sanitizer build, makes
fewer kills, at least MIN_KILLS, within it), at most 8 tries of one command, 60 s per call.
"""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
KILLS = int(os.environ.get("STATEGRAPH_CLI_KILLS", "24"))
BUDGET = float(os.environ.get("STATEGRAPH_CLI_KILL_SECONDS", "150"))
MIN_KILLS = min(8, KILLS)
SEED = int(os.environ.get("STATEGRAPH_KILL_SEED", str(random.randrange(1 << 30))))
rng = random.Random(SEED)
failures = []

# The user's sequence: the Thomas message pauses with a question; the answer; a request that
# fans out to three agents in one step; a greeting, never killed: the round ends with a call that
# finishes whatever the killed ones left.
SEQUENCE = [
    ("chat", "Thomas is traveling to Mallorca next week"),
    ("resume", "Thomas Berger"),
    ("chat", "Plan my week: book flights to Zurich, review my portfolio and research slow hotels near the lake"),
    ("chat", "Hi there!"),
]


def fail(what):
    failures.append(what)
    print("FAIL: " + what, file=sys.stderr)


def call(db, thread, cmd, text, kill_after=None):
    """Runs one command; with kill_after (seconds) SIGKILLs it then. Returns (killed, rc, stdout)."""
    p = subprocess.Popen([BIN, cmd, "--db", db, "--thread", thread, "--json", text],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed = False
    if kill_after is not None:
        try:
            p.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            killed = True
    out, err = p.communicate(timeout=60)
    if killed and p.returncode != -signal.SIGKILL:
        killed = False  # it ended before the signal
    return killed, p.returncode, out.decode(), err.decode()


def state(db, thread):
    """The thread's state, or None when nothing of it was ever stored."""
    r = subprocess.run([BIN, "state", "--db", db, "--thread", thread, "--json"], capture_output=True, timeout=60)
    if r.returncode != 0:
        err = r.stderr.decode()
        if any(k in err for k in ("thread_not_found", "no database at", "has no checkpoints")):
            return None  # killed before anything of the thread was stored
        fail(f"state of {thread} unreadable (exit {r.returncode}): {err.strip()}")
        return None
    return json.loads(r.stdout)


def history_writers(db, thread):
    r = subprocess.run([BIN, "history", "--db", db, "--thread", thread, "--json"], capture_output=True, timeout=60)
    if r.returncode != 0:
        return []
    return [w for h in json.loads(r.stdout) for w in h["writers"]]


def calibrate(work):
    """How long each command of the sequence takes unkilled (the kill moments are drawn below it)."""
    db = os.path.join(work, "calibrate.db")
    took = []
    for cmd, text in SEQUENCE:
        t0 = time.monotonic()
        killed, rc, out, err = call(db, "c", cmd, text)
        took.append(time.monotonic() - t0)
        if rc != 0:
            fail(f"unkilled {cmd} exited {rc}: {err.strip()}")
    return took


def fingerprint(s):
    return None if s is None else (s["checkpoint_id"], s["status"])


def main():
    work = tempfile.mkdtemp(prefix="gs_kill.")
    try:
        took = calibrate(work)
        print(f"cli_kill: seed {SEED} (STATEGRAPH_KILL_SEED={SEED} repeats it), {KILLS} kills; unkilled calls take "
              + ", ".join(f"{t * 1000:.0f} ms" for t in took))
        kills = rounds = recovered_turns = 0
        phases = {}
        started = time.monotonic()
        out_of_time = False
        while kills < KILLS and rounds < 4 * KILLS:
            if kills >= MIN_KILLS and time.monotonic() - started > BUDGET:
                out_of_time = True  # a round is never cut short: each one ends checked
                break
            rounds += 1
            db = os.path.join(work, f"round{rounds}.db")
            thread = "s"
            for i, (cmd, text) in enumerate(SEQUENCE):
                for attempt in range(8):
                    before = state(db, thread)
                    last = i == len(SEQUENCE) - 1
                    kill = kills < KILLS and not last and attempt < 4 and rng.random() < 0.7
                    # Process start-up takes a good part of a call: most moments fall after it.
                    delay = rng.uniform(0.2, 1.25) * took[i] if kill else None
                    killed, rc, out, err = call(db, thread, cmd, text, delay)
                    after = state(db, thread)
                    if killed:
                        kills += 1
                        phase = "nothing stored" if after is None else after["status"]
                        phases[f"{cmd} killed, thread {phase}"] = phases.get(f"{cmd} killed, thread {phase}", 0) + 1
                        if fingerprint(after) != fingerprint(before):
                            break  # the call left its trace: the user goes on
                        continue  # nothing happened: the user repeats the command
                    if rc != 0:
                        if cmd == "resume" and "nothing_to_resume" in err:
                            break  # the question was never asked (its chat was killed before): nothing to answer
                        fail(f"round {rounds}: unkilled {cmd} '{text}' exited {rc}: {err.strip()}")
                        break
                    result = json.loads(out)
                    if before is not None and before["status"] == "pending":
                        if not result.get("recovered"):
                            fail(f"round {rounds}: {cmd} after a killed call left the turn pending "
                                 f"(next {before['next']}) and did not finish it")
                        else:
                            recovered_turns += 1
                    if after is None or after["status"] == "pending":
                        fail(f"round {rounds}: after an unkilled {cmd} the thread is "
                             f"{'missing' if after is None else 'pending, next ' + str(after['next'])}")
                    break
            # The round's end: once the answer was taken, it reached the memory.
            final = state(db, thread)
            if final is not None and final["status"] == "pending":
                fail(f"round {rounds}: the thread ends pending (next {final['next']})")
            # The fan-out request: once its plan was made (a checkpoint of global_planner), its
            # reply has all three agents' results by the round's end (issue 23, break 1: a kill
            # mid fan-out read as a finished turn; the third agent and the reply were dropped).
            writers = history_writers(db, thread)
            if "global_planner" in writers:
                con = sqlite3.connect(db)
                try:
                    replies = [r[0] for r in con.execute(
                        "SELECT content FROM messages WHERE chat_id = ? AND role = 'assistant' AND content LIKE '%Productivity:%'",
                        (thread,))]
                finally:
                    con.close()
                if not any(all(a in r for a in ("Productivity:", "Wealth:", "Research:")) for r in replies):
                    fail(f"round {rounds}: the plan was made but no reply has the three agents' results: {replies}")
            if "disambiguation_blocking" in writers:
                con = sqlite3.connect(db)
                try:
                    who = [r[0] for r in con.execute(
                        "SELECT c.full_name FROM store_items f JOIN contacts c ON c.id = json_extract(f.value, '$.contact_id') "
                        "WHERE json_extract(f.value, '$.text') LIKE 'Thomas is traveling%'")]
                    confirmed = con.execute(
                        "SELECT count(*) FROM messages WHERE chat_id = ? AND content LIKE '%saved that for Thomas Berger%'",
                        (thread,)).fetchone()[0]
                finally:
                    con.close()
                if who != ["Thomas Berger"]:
                    fail(f"round {rounds}: the answer was taken but the fact is stored for {who}")
                if confirmed != 1:
                    fail(f"round {rounds}: the answer was taken but the confirmation is in the messages {confirmed} times")
        print(f"cli_kill: {kills} kills in {rounds} rounds; {recovered_turns} turns left by a killed call finished "
              f"by the next chat or resume")
        for phase, n in sorted(phases.items()):
            print(f"  {n} {phase}")
        if out_of_time:
            print(f"cli_kill: {BUDGET:.0f} s spent after {kills} of {KILLS} kills (calls slower than usual here)")
        elif kills < KILLS:
            fail(f"only {kills} kills in {rounds} rounds")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("cli_kill: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
