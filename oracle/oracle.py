"""The Oracle: a campaign's questions answered, each stage in its own module, called here in order.

    search (`retrieve.pipeline`) → select: rerank and pack (`answer.rerank`, `answer.context`)
    → write (`answer.writer`), else passages (`answer.passages`); a recap picks its session
    (`answer.recap`) and is written the same way.

Each question reads one snapshot of the index and has one deadline, started once the process's
one-off startup (model, question encoder, dense index) is done.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from .answer.citations import Citation, CitedText, cited_lines
from .answer.context import Context, pack_context
from .answer.excerpts import Excerpt
from .answer.leaks import Guards
from .answer.passages import Fallbacks, excerpts, passages_answer
from .answer.prompt import Turn
from .answer.recap import pick_session, recap_prompt, session_passages
from .answer.rerank import Candidate, Reranked, make_reranker
from .answer.results import Answer, compose
from .answer.selection import Selection
from .answer.trace import PLAYER_REASON
from .answer.writer import Asking, StageFn, Unwritten, Writer
from .deadline import RERANK_SHARE, Deadline
from .dossier import Dossiers
from .index import annotate
from .index.index import Index
from .index.seam import search_concurrency
from .index.store import Store
from .lexicon import DEFAULT
from .llm import TextFn
from .offload import off_loop
from .policy import AUTO
from .retrieve.entity import Matchers
from .retrieve.pipeline import SearchPipeline, elapsed_ms
from .retrieve.retrieval import Retrieval
from .text import clipped
from .texts import Texts, question_language, texts
from .types import Chunk, Clearance

log = logging.getLogger(__name__)


class Oracle:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.settings = settings = index.settings
        self.matchers = Matchers(index)
        self.dossiers = Dossiers(index, self.matchers)
        # Shared by every campaign on one Ollama when the index was opened with its slots.
        self.llm_slots = index.llm_slots or asyncio.Semaphore(settings.llm_concurrency)
        self.search_slots = index.search_slots or asyncio.Semaphore(search_concurrency(settings))
        self.pipeline = SearchPipeline(settings, self.matchers)
        self.reranker = make_reranker(
            settings.reranker, llm=index.llm, timeout=RERANK_SHARE * settings.first_words, slots=self.llm_slots,
            cross_encoder=settings.cross_encoder, cross_encoder_text=settings.cross_encoder_input == "text",
        )
        self.writer = Writer(index.llm, self.llm_slots, settings, Guards(), index.record_withheld)
        self.fallbacks = Fallbacks()  # answers given as passages because the model failed, in this process

    async def search(
        self,
        question: str,
        *,
        history: Sequence[str] = (),
        clearance: Clearance = Clearance.PLAYER,
        k: int | None = None,
        store: Store | None = None,
        told: str | None = None,
    ) -> Retrieval:
        """Retrieval alone. `store`: the snapshot of the question it is part of, else one of its own;
        `told`: the passage the thread told last (`Answer.told`), which "and then what?" goes
        on from. Raises PolicyChanged for a player when the index was built under another policy."""
        await self.index.check_policy(clearance)
        vectors = await self.index.vectors()
        embedder = await self.index.embedder()  # loaded once per process, not a cost of the question
        k = k or self.settings.k
        if store is not None:
            return await self.pipeline.search(store, vectors, embedder, question, history, clearance, k, told=told)
        async with self.index.snapshot() as snapshot:
            return await self.pipeline.search(snapshot, vectors, embedder, question, history, clearance, k,
                                              told=told)

    async def select(
        self, retrieval: Retrieval, k: int | None = None, *, store: Store | None = None, within: float | None = None,
    ) -> Selection:
        """Rerank the pool (fused, then linked) on its cached annotations and pack the context.
        `store`: the question's snapshot (the index served now, when left out); `within`: the seconds
        the rerank may take (its share of ORACLE_FIRST_WORDS_SECONDS, when left out)."""
        k = k or self.settings.k
        pool = [h.chunk for h in retrieval.pool]
        store = store or await self.index.store()
        annotations = await self._annotations(store, pool)
        candidates = [Candidate(c, annotations.get(c.id)) for c in pool]
        t = time.perf_counter()
        if retrieval.told is None:
            reranked = await self.reranker.rerank(retrieval.question, candidates, k, within=within)
        else:  # "and then what?" is answered in the notes' order, which no question's words can rank
            asks = "what came next" if retrieval.went == "on" else "what came before"
            reranked = Reranked([c.id for c in pool], False, f"off: the question asks {asks}", [])
        retrieval.timings_ms["rerank"] = elapsed_ms(t)
        by_id = {c.id: c for c in pool}
        final = [by_id[cid] for cid in reranked.order]
        context = pack_context(final, annotations, k=k, max_headlines=self.settings.max_headlines)
        return Selection(final, context, reranked, annotations)

    async def ask(
        self,
        question: str,
        *,
        history: Sequence[Turn] = (),
        clearance: Clearance = Clearance.PLAYER,
        on_stage: StageFn | None = None,
        on_text: TextFn | None = None,
    ) -> Answer:
        """Answer from the notes. Never raises for a bad question or a missing LLM; never hangs.
        `on_text` gets the answer so far (the whole text each time) while the model writes it, for a
        player only until it repeats a secret; the Answer returned is the verified one, which may
        differ (unknown citations removed, or withheld). Its first words are due within
        ORACLE_FIRST_WORDS_SECONDS (`Deadline`), else the passages come at once."""
        stage, show_text = _stager(on_stage), _shower(on_text, question)
        question = " ".join(question.split())
        if not question:
            words = texts(self.settings.language if self.settings.language != AUTO else DEFAULT)
            return self._cleared(self._compose(question, words.empty_question, "not_found", "empty question"),
                                 clearance, words)
        await self._ready()
        deadline = Deadline.of(self.settings)
        started = time.perf_counter()
        async with self.index.snapshot() as store:  # every stage of the question reads one index
            await stage("searching")
            # What the Oracle writes itself, in the question's language (the vault's when it cannot tell).
            words = texts(question_language(question, (await store.stemming()).code))
            user_turns = [t.content for t in history if t.role == "user"]
            # The passage told last in the thread: an answer that cited nothing told none.
            told = next((t.told for t in reversed(history) if t.role == "assistant" and t.told), None)
            async with self.search_slots:
                retrieval = await self.search(question, history=user_turns, clearance=clearance, store=store,
                                              told=told)
            if not retrieval.fused:
                answer = self._compose(question, words.not_found, "not_found", "no passage matched", retrieval=retrieval)
                return self._cleared(answer, clearance, words)
            await self._start_loading(deadline)
            if self.settings.reranker == "llm" and self.llm_slots.locked():
                await stage("queued")
            await stage("ranking")
            selection = await self.select(retrieval, store=store, within=deadline.rerank_left())
            asking = Asking(store=store, question=question, prompt=question, history=history, clearance=clearance,
                            retrieval=retrieval, selection=selection, deadline=deadline, started=started,
                            stage=stage, show_text=show_text)
            written = await self.writer.write(asking)
            if isinstance(written, Unwritten):
                written = await self._passages(asking, written, words)
            return self._cleared(written, clearance, words)

    async def _passages(self, asking: Asking, unwritten: Unwritten, words: Texts) -> Answer:
        """The model gave nothing usable: the passages, with the reason."""
        timings = asking.retrieval.timings_ms
        timings["answer"] = elapsed_ms(unwritten.began)
        timings["total"] = elapsed_ms(asking.started)
        log.warning("answering %r without the LLM: %s", clipped(asking.question), unwritten.reason)
        if unwritten.reason != PLAYER_REASON:  # a withheld answer is recorded as such (`Writer`)
            self.fallbacks.add(asking.question, unwritten.reason)
        return await passages_answer(
            await self.index.embedder(), asking.question, unwritten.reason, asking.retrieval, asking.selection,
            unwritten.trace, clearance=asking.clearance, reranker=self.settings.reranker, cause=unwritten.cause,
            words=words,
        )

    async def recap(
        self,
        session: str | None = None,
        *,
        clearance: Clearance = Clearance.PLAYER,
        on_stage: StageFn | None = None,
        on_text: TextFn | None = None,
    ) -> Answer:
        """"Previously on…": the last session (or the one `session` names: "12", "Session 12", a word
        of its title) retold from the text its reader may read, cited like an answer. Without the
        model, the session's annotation and opening lines as passages."""
        await self.index.check_policy(clearance)
        deadline = Deadline.of(self.settings)
        started = time.perf_counter()
        stage, show_text = _stager(on_stage), _shower(on_text, f"recap {session or ''}")
        async with self.index.snapshot() as store:
            words = texts((await store.stemming()).code)  # a recap is told in the vault's language
            parts = pick_session(await store.session_chunks(clearance), session)
            if not parts:
                text = words.no_session_matching.format(session=session) if session else words.no_session
                answer = self._compose(f"Recap of {session or 'the last session'}", text, "not_found", "no session")
                return self._cleared(answer, clearance, words)
            label = parts[0].label
            question = f"Recap of {label}"
            annotations = await self._annotations(store, parts)
            fragments = tuple(parts[: self.settings.k])
            selection = Selection(
                list(fragments), Context(fragments, ()),
                Reranked([c.id for c in fragments], False, "recap: the session in note order", []), annotations,
            )
            retrieval = Retrieval(question, question, [], {}, [])
            await self._start_loading(deadline)
            await stage("writing")
            asking = Asking(store=store, question=question, prompt=recap_prompt(label), history=(),
                            clearance=clearance, retrieval=retrieval, selection=selection, deadline=deadline,
                            started=started, stage=stage, show_text=show_text)
            written = await self.writer.write(asking)
            if isinstance(written, Unwritten):
                log.warning("recap of %s without the LLM: %s", label, written.reason)
                shown = written.reason if clearance.gm else words.unwritten(written.cause)
                text, citation = session_passages(shown, parts, annotations, words)
                written = self._compose(question, text, "passages", shown, retrieval=retrieval, selection=selection,
                                        citations=(citation,), cause=written.cause,
                                        trace=written.trace | {"player_reason": words.unwritten(written.cause)})
            # It told the session through its last part read: what came next comes after that.
            return self._cleared(replace(written, told=fragments[-1].id), clearance, words)

    async def cited(self, citations: Sequence[Citation], *, clearance: Clearance) -> list[CitedText]:
        """What each citation points at, read again from the index as it is now and only as far as
        the reader's clearance goes: the lines of a public chunk, a secret's chunk for a game master.
        A citation whose text the reader may not read (or that is gone) comes back with no text."""
        out: list[CitedText] = []
        async with self.index.snapshot() as store:
            for c in citations:
                chunks = await store.chunks_at(c.path, c.start_line, c.end_line, clearance)
                chunks = [ch for ch in chunks if ch.label == c.label] or chunks
                out.append(CitedText(c, cited_lines(chunks, c.start_line, c.end_line)))
        return out

    async def excerpts(self, retrieval: Retrieval, chunks: Sequence[Chunk]) -> list[Excerpt]:
        """The sentences of each chunk that best match the question (`answer.passages.excerpts`)."""
        return await excerpts(await self.index.embedder(), retrieval, chunks)

    async def _ready(self) -> None:
        """What a process opens once (the embedding model, its question encoder, the dense index),
        opened before a question's deadline starts: it is the process's startup, not the question's
        time (each is at hand at once after the first)."""
        embedder = await self.index.embedder()
        await off_loop(embedder.in_thread.prepare_queries)
        await self.index.vectors()

    async def _start_loading(self, deadline: Deadline) -> None:
        """The model set loading now when Ollama does not hold it (`LLM.start_loading`): the load
        goes on whatever the question's deadline, and the next question finds the model loaded."""
        await self.index.llm.start_loading(min(self.settings.ollama_probe_timeout, deadline.left()))

    async def _annotations(self, store: Store, chunks: Sequence[Chunk]) -> dict[str, str]:
        """The cached annotations of `chunks`, by chunk id, for this Ollama model and prompt."""
        by_hash = await store.annotations_of([c.text_hash for c in chunks], self.settings.model,
                                             annotate.PROMPT_VERSION)
        return {c.id: by_hash[c.text_hash] for c in chunks if c.text_hash in by_hash}

    def _compose(self, question: str, text: str, mode, reason: str, **parts) -> Answer:
        return compose(question, text, mode, reason, reranker=self.settings.reranker, **parts)

    @staticmethod
    def _cleared(answer: Answer, clearance: Clearance, words: Texts | None = None) -> Answer:
        """The answer marked with its reader's clearance (`Answer.to_json()` for a player names no
        host, path or error: the answer keeps them, for the game master and the log) and with the
        language the Oracle wrote its own words in."""
        return replace(answer, clearance=clearance, language=words.code if words else answer.language)


def _stager(on_stage: StageFn | None) -> StageFn:
    async def stage(name: str) -> None:
        if on_stage is not None:
            await on_stage(name)

    return stage


def _shower(on_text: TextFn | None, what: str) -> TextFn | None:
    """The text so far, to whoever shows it (None: nobody); a display that fails stops showing, the
    answer goes on."""
    if on_text is None:
        return None
    show: list[TextFn] = [on_text]

    async def show_text(text: str) -> None:
        if not show:
            return
        try:
            await show[0](text)
        except Exception:
            log.warning("showing the answer to %r as it is written failed; it is shown when done", clipped(what),
                        exc_info=True)
            show.clear()

    return show_text
