"""memctl.chat_input: Ctrl-C during a turn. Python drops a KeyboardInterrupt raised inside a
__del__ method or a garbage-collector callback; the turn must stop all the same."""

from __future__ import annotations

import signal
import threading
import time
from typing import ClassVar

import pytest
from memctl.chat_input import interrupts_not_dropped


def _ctrl_c_in(seconds: float) -> None:
    main = threading.main_thread().ident or 0
    threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT)).start()


class SlowFinalizer:
    """An object whose __del__ is running when Ctrl-C arrives: the key is pressed from inside
    it (a timer started before it could fire only once it had ended, on a busy machine)."""

    dropped: ClassVar[list[bool]] = []

    def __del__(self) -> None:
        try:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            time.sleep(30)  # the interrupt ends it
        except KeyboardInterrupt:
            SlowFinalizer.dropped.append(True)
            raise  # Python prints "Exception ignored in ..." and goes on


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_python_dropped_is_raised_again() -> None:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupts_not_dropped():
        finalizer = SlowFinalizer()
        del finalizer  # its __del__ runs now, and the interrupt is raised in it
        assert SlowFinalizer.dropped == [True]
        time.sleep(60)  # without the redelivery the turn would go on
    assert time.monotonic() - started < 20


def test_a_handled_ctrl_c_is_not_raised_again() -> None:
    with pytest.raises(KeyboardInterrupt), interrupts_not_dropped():
        _ctrl_c_in(0.05)
        time.sleep(5)
    time.sleep(1)  # nothing more arrives once the turn has ended
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handled_ctrl_c_is_not_raised_again_during_a_long_clean_up() -> None:
    # The turn stops and cleans up (kills a command, saves the transcript): a second
    # interrupt there would cut the clean-up short.
    cleaned: list[bool] = []
    with pytest.raises(KeyboardInterrupt), interrupts_not_dropped():
        try:
            _ctrl_c_in(0.05)
            time.sleep(30)
        finally:
            time.sleep(3)
            cleaned.append(True)
    assert cleaned == [True]
