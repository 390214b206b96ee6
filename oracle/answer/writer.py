"""Writing an answer: the model streams it from the selected context, within the question's deadline.

Its citations are checked and a player's answer is guarded against secrets, as it is shown and once
it is done. When the model gives nothing usable, `Writer.write` says why (`Unwritten`) and the caller
shows passages instead: the question's best passages (`Oracle.ask`) or a session's opening (recap).
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from ..context_window import ContextWindow
from ..deadline import Deadline
from ..index.store import Store
from ..llm import LLM, Reply, TextFn
from ..llm_errors import LLMError, LLMUnavailable, StreamCut
from ..offload import question_step
from ..retrieve.pipeline import elapsed_ms
from ..retrieve.retrieval import Retrieval
from ..settings import Settings, setting_name
from ..text import clipped
from ..types import Clearance
from .budget import fit_answer_prompt
from .citations import Verified, verify
from .context import Context
from .leaks import Guards, SecretGuard, StreamCheck
from .prompt import Turn
from .results import Answer, Cause, compose
from .selection import Selection
from .trace import PLAYER_INCOMPLETE, PLAYER_REASON, AnswerParts, CitationRecord

StageFn = Callable[[str], Awaitable[None]]

# Why the game master's log and `status` say a player's answer was withheld: it repeated a secret.
WITHHELD = "the answer repeated game-master-only notes"
# A stream cut before this many words of whole sentences is shown as passages instead: a sentence
# or two is not yet an answer.
MIN_PARTIAL_WORDS = 20
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|\]")

log = logging.getLogger(__name__)


async def _no_stage(name: str) -> None:
    return None


@dataclass(kw_only=True)
class Asking:
    """One question on its way to a written answer: what every step of writing it reads (named at
    every call: eleven fields, four of them strings or sequences, are easy to pass in the wrong order)."""

    store: Store  # the question's snapshot of the index
    question: str  # as the reader asked it ("Recap of Session 12" for a recap)
    prompt: str  # what the model is asked to answer
    history: Sequence[Turn]
    clearance: Clearance
    retrieval: Retrieval
    selection: Selection
    deadline: Deadline
    started: float = field(default_factory=time.perf_counter)
    stage: StageFn = _no_stage
    show_text: TextFn | None = None  # the answer so far, to whoever shows it as it is written


@dataclass(frozen=True)
class Unwritten:
    """The model gave nothing usable: why (for the game master and the log), what the trace adds,
    when writing began, and the cause a player is told."""

    reason: str
    trace: AnswerParts
    began: float
    cause: Cause = "unusable"

    @property
    def loading(self) -> bool:
        return self.cause == "loading"


class Writer:
    def __init__(
        self,
        llm: LLM,
        slots: asyncio.Semaphore,
        settings: Settings,
        guards: Guards,
        record_withheld: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self.llm = llm
        self.slots = slots
        self.settings = settings
        self.guards = guards
        self.record_withheld = record_withheld

    async def write(self, asking: Asking) -> Answer | Unwritten:
        """The answer streamed by the model, its citations checked. Nothing written by the deadline
        gives `Unwritten` at once (`loading`: the model was still loading then). Once words flow, a
        pause of ORACLE_TOKEN_GAP_SECONDS or the end of ORACLE_ANSWER_TIMEOUT ends the answer on its
        last whole sentence."""
        window = await self.llm.window(max(asking.deadline.left(), 0.001))
        # Counting a prompt's tokens is milliseconds of pure Python a question: off the event loop.
        fitted = await question_step(
            fit_answer_prompt, asking.prompt, asking.selection.context, asking.history, num_ctx=window.num_ctx,
            reply_tokens=window.answer_tokens,
        )
        asking.selection.context = fitted.context
        calls = int(asking.selection.rerank.called) + 1  # the rerank call, if made, and the answer call
        extra: AnswerParts = {"llm_calls": calls, "tokens": fitted.tokens}
        guard = None if asking.clearance.gm else await self.guards.of(asking.store)
        if self.slots.locked():
            await asking.stage("queued")
        t = time.perf_counter()
        written = await self._stream(asking, fitted.messages, window, guard, extra, t)
        if isinstance(written, Unwritten):
            return written
        asking.retrieval.timings_ms["answer"] = elapsed_ms(t)
        return await self._answer(asking, written, guard, extra, t)

    async def _stream(self, asking: Asking, messages: list[dict[str, str]], window: ContextWindow,
                      guard: SecretGuard | None, extra: AnswerParts, t: float) -> Written | Unwritten:
        """The model's reply, in one of its slots and within the deadline, shown as it comes."""
        deadline, retrieval = asking.deadline, asking.retrieval
        show_text = asking.show_text
        if guard is not None and show_text is not None:
            show_text = _unless_leaking(show_text, StreamCheck(guard))

        async def timed_text(text: str) -> None:
            # The trace's "first_words": milliseconds from the question to the first text written.
            retrieval.timings_ms.setdefault("first_words", elapsed_ms(asking.started))
            if show_text is not None:
                await show_text(text)

        try:
            async with asyncio.timeout(deadline.left()):
                await self.slots.acquire()
        except TimeoutError:
            return self._late(deadline, extra, t, "no model slot came free "
                              f"({setting_name('llm_concurrency')}={self.settings.llm_concurrency})")
        try:
            await asking.stage("writing")
            reply = await self.llm.stream_chat(
                messages, on_text=timed_text, timeout=deadline.whole_left(), first_text=deadline.left(),
                token_gap=deadline.token_gap, num_predict=window.answer_tokens,
            )
            return _whole_reply(reply, window, extra)
        except StreamCut as exc:
            return _cut_reply(asking, exc, extra, t)
        except LLMError as exc:
            if exc.timed_out:  # nothing written by the deadline: the bound of the first words
                return self._late(deadline, extra, t)
            return Unwritten(str(exc), extra, t, "unavailable" if isinstance(exc, LLMUnavailable) else "unusable")
        finally:
            self.slots.release()

    async def _answer(self, asking: Asking, written: Written, guard: SecretGuard | None, extra: AnswerParts,
                       t: float) -> Answer | Unwritten:
        """The reply with its citations verified, or withheld from a player when it repeats a secret."""
        retrieval, selection = asking.retrieval, asking.selection
        verified, leaked = await question_step(_checked, written.text, selection.context, guard)
        if leaked:
            # Players get the passages as if the model had failed: saying why would tell them a
            # secret lies there. The game master reads the reason in the log and in `status`.
            log.warning("withheld the answer to %r: it repeated game-master-only text (check the notes)",
                        clipped(asking.question))
            await self._withheld(asking.question)
            return Unwritten(PLAYER_REASON, extra, t)
        retrieval.timings_ms["total"] = elapsed_ms(asking.started)
        shown = verified.text
        if written.incomplete:
            extra["incomplete"] = written.incomplete
            shown_why = written.incomplete if asking.clearance.gm or not written.cut else PLAYER_INCOMPLETE
            shown = f"{shown}\n\n*(The answer stops here: {shown_why}.)*"
        citations = CitationRecord([c.label for c in verified.citations], list(verified.unknown),
                                   verified.uncited_sentences)
        return compose(
            asking.question, shown, "llm", "", reranker=self.settings.reranker, retrieval=retrieval,
            selection=selection, citations=verified.citations, trace={**extra, "citations": citations},
        )

    def _late(self, deadline: Deadline, extra: AnswerParts, t: float, why: str = "") -> Unwritten:
        """The first words were not written by the deadline: the passages at once, saying so (and,
        to a player too, that the model is still loading when it is)."""
        loading = self.llm.loading
        reason = deadline.missed + (": the model is still loading" if loading else f": {why}" if why else "")
        return Unwritten(reason, extra, t, "loading" if loading else "late")

    async def _withheld(self, question: str) -> None:
        """Kept in the index for the game master's `status`; never costs the player an answer."""
        try:
            await self.record_withheld(question, WITHHELD)
        except Exception:
            log.exception("could not record a withheld answer")


@dataclass(frozen=True)
class Written:
    """What the model wrote: all of it, or its whole sentences and why it stops there (`cut`: the
    stream was cut, whose reason only the game master reads)."""

    text: str
    incomplete: str = ""
    cut: bool = False


def _whole_reply(reply: Reply, window: ContextWindow, extra: AnswerParts) -> Written:
    """A reply the model ended; one that ran out of its budget mid-sentence shows the sentences it finished."""
    extra["tokens"] = replace(extra["tokens"], prompt_eval_count=reply.prompt_eval_count, eval_count=reply.eval_count)
    if not reply.text.strip():
        raise LLMError("the model gave an empty answer")
    if reply.done_reason == "length" and len(_whole_sentences(reply.text).split()) >= MIN_PARTIAL_WORDS:
        return Written(_whole_sentences(reply.text),
                       f"it reached its budget of {window.answer_tokens} tokens ({setting_name('answer_tokens')})")
    return Written(reply.text)


def _cut_reply(asking: Asking, exc: StreamCut, extra: AnswerParts, t: float) -> Written | Unwritten:
    """A stream cut after it began: its whole sentences, unless too few to be an answer."""
    why = _cut(exc, asking.deadline)
    text = _whole_sentences(exc.partial)
    if len(text.split()) < MIN_PARTIAL_WORDS:
        written = len(exc.partial.split())
        return Unwritten(f"the answer stopped after {written} word{'' if written == 1 else 's'}: {why}", extra, t)
    log.warning("answer to %r cut after %d words: %s", clipped(asking.question), len(text.split()), why)
    return Written(text, why, cut=True)


def _checked(text: str, context: Context, guard: SecretGuard | None) -> tuple[Verified, bool]:
    """The answer's citations verified, and whether it repeats game-master-only text (`guard`: a
    player's question)."""
    verified = verify(text, context)
    return verified, guard is not None and guard.leaks(verified.text)


def _cut(exc: StreamCut, deadline: Deadline) -> str:
    """Why a stream that had begun stopped, naming the setting that bounded it."""
    if exc.bound == "gap":
        return f"the model wrote nothing for {deadline.token_gap:g} s ({setting_name('token_gap')})"
    if exc.bound == "whole":
        return f"the answer was still being written {deadline.whole:g} s after the question ({setting_name('answer_timeout')})"
    return str(exc)


def _whole_sentences(text: str) -> str:
    """A cut reply up to its last whole sentence or closed citation: no half label is ever shown."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].rstrip() if ends else ""


def _unless_leaking(show_text: TextFn, check: StreamCheck) -> TextFn:
    """A player sees the answer as it is written only while it repeats no secret: from the first
    text that does, nothing more is shown, and the finished answer is withheld."""

    async def show(text: str) -> None:
        if not check.leaks(text):
            await show_text(text)

    return show
