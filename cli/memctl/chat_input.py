"""What `memctl chat` reads: messages from a terminal or from piped stdin.

On a terminal (prompt_toolkit, imported only here): a paste is inserted whole (bracketed
paste), so several pasted lines are one message; Enter sends; Esc then Enter (or Alt+Enter),
Ctrl-J, or a line ending in a backslash starts a new line instead. Lines are kept in a
history file, created user-only, without those that look like they hold a secret.

Piped: one message per line; a line ending in a backslash goes on with the next line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

PROMPT = "› "
# How long after Python dropped a Ctrl-C it is raised again: past the finalisers' run.
REDELIVERY_DELAY_S = 0.05
CONTINUATION = "· "


class MessageInput(Protocol):
    def read(self) -> str:
        """The next message; EOFError at the end, KeyboardInterrupt on Ctrl-C."""
        ...

    def ask(self, question: str) -> str:
        """One line of answer to `question` (EOFError when there is none)."""
        ...


class PipedInput:
    def read(self) -> str:
        parts: list[str] = []
        while True:
            line = sys.stdin.readline()
            if not line:
                if parts:
                    break
                raise EOFError
            line = line.rstrip("\r\n")
            if not line.endswith("\\"):
                parts.append(line)
                break
            parts.append(line[:-1])
        return "\n".join(parts)

    def ask(self, question: str) -> str:
        raise EOFError  # piped stdin holds messages, not answers


class TerminalInput:
    def __init__(self, history_file: Path) -> None:
        from prompt_toolkit import PromptSession

        self._session: Any = PromptSession(
            history=private_history(history_file),
            multiline=True,
            key_bindings=_message_keys(),
            prompt_continuation=lambda width, line, wrapped: CONTINUATION.rjust(width),
            enable_open_in_editor=False,
        )

    def read(self) -> str:
        return str(self._session.prompt(PROMPT))

    def ask(self, question: str) -> str:
        from prompt_toolkit import prompt

        return str(prompt(question))


def _message_keys() -> Any:
    from prompt_toolkit.key_binding import KeyBindings

    keys = KeyBindings()

    @keys.add("enter")
    def _send(event: Any) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    @keys.add("c-j")
    def _new_line(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    return keys


def private_history(path: Path) -> Any:
    """prompt_toolkit's file history, kept user-only and without lines that look like they
    hold a secret (every typed line is in it)."""
    from prompt_toolkit.history import FileHistory

    from memstore.storage.secrets import find_secrets

    class PrivateHistory(FileHistory):
        def store_string(self, string: str) -> None:
            if find_secrets(string):
                return
            entry = f"\n# {datetime.now()}\n" + "".join(f"+{line}\n" for line in string.split("\n"))
            with contextlib.suppress(OSError), _open_private(path) as handle:
                handle.write(entry.encode("utf-8"))

    with contextlib.suppress(OSError):
        if path.exists():
            path.chmod(0o600)
            _convert_readline_history(path, find_secrets)
    return PrivateHistory(str(path))


def _convert_readline_history(path: Path, find_secrets: Any) -> None:
    """Earlier versions kept readline's format (one line per entry) and every line: rewrite
    it in prompt_toolkit's format without the lines that look like secrets."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text or text.startswith(("\n#", "#", "+")):
        return
    kept = [line for line in text.splitlines() if line.strip() and not find_secrets(line)]
    entries = "".join(f"\n# (readline)\n+{line}\n" for line in kept)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    with _open_private(temporary) as handle:
        handle.write(entries.encode("utf-8"))
    temporary.replace(path)


@contextlib.contextmanager
def _open_private(path: Path) -> Iterator[Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No link followed: a planted link must not send typed lines elsewhere.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "ab") as handle:
        yield handle


@contextlib.contextmanager
def keys_kept_for_the_prompt() -> Iterator[None]:
    """For the whole session, outside the prompt: keys typed are not echoed (a `^C` echoed
    into the live area moves the cursor, and the answer is drawn again below itself) and not
    edited by the terminal's line discipline, so what a person types ahead reaches the next
    prompt as typed: Enter sends, Ctrl-D ends the session (in the terminal's line mode a
    Ctrl-D was an end-of-file nobody read, and Enter arrived as Ctrl-J, a new line). Ctrl-C
    still interrupts. The prompt sets its own mode and comes back to this one."""
    try:
        import termios
    except ImportError:  # not on a POSIX terminal
        yield
        return
    descriptor = sys.stdin.fileno()
    try:
        saved = termios.tcgetattr(descriptor)
    except termios.error:
        yield
        return
    kept = list(saved)
    kept[0] &= ~termios.ICRNL
    kept[3] &= ~(termios.ECHO | termios.ECHOCTL | termios.ICANON | termios.IEXTEN)
    kept[6] = list(saved[6])
    kept[6][termios.VMIN], kept[6][termios.VTIME] = 1, 0
    termios.tcsetattr(descriptor, termios.TCSANOW, kept)
    try:
        yield
    finally:
        termios.tcsetattr(descriptor, termios.TCSANOW, saved)


@contextlib.contextmanager
def interrupts_not_dropped() -> Iterator[None]:
    """While a turn runs: every Ctrl-C stops it. Python drops a KeyboardInterrupt raised while
    a garbage-collector callback or a __del__ method runs: it hands it to sys.unraisablehook
    ("Exception ignored in ...") and the turn went on as if the key had not been pressed. Such
    an interrupt is raised again in the main thread; one the turn handled never is, however
    long its clean-up takes (killing a command, saving the transcript)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    main = threading.main_thread().ident or 0
    dropped = threading.Event()
    stop = threading.Event()
    previous_hook = sys.unraisablehook

    def on_unraisable(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            dropped.set()  # said by the turn stopping, not by a traceback on the screen
            return
        previous_hook(unraisable)

    def redeliver() -> None:
        # From a thread, a moment later: sent from the hook, it would land in the same run of
        # finalisers and be dropped again. Delivered to the main thread, it interrupts a
        # blocking read there.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        while dropped.wait() and not stop.is_set():
            dropped.clear()
            time.sleep(REDELIVERY_DELAY_S)
            if not stop.is_set():
                signal.pthread_kill(main, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.unraisablehook = on_unraisable
    watcher = threading.Thread(target=redeliver, name="memctl-interrupts", daemon=True)
    watcher.start()
    try:
        yield
    finally:  # an interrupt that ends the turn was handled: nothing is raised again
        stop.set()
        dropped.set()  # wakes the watcher
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous)
        watcher.join()
