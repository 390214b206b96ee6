"""The one orchestration: `Oracle.search` (retrieval) and, on top of it, `Oracle.ask`.

Stages are plain functions in their own modules; this class only calls them in order, times them,
and keeps the trace.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from .answer.budget import fit_answer_prompt
from .answer.citations import Citation, Verified, verify
from .answer.context import Context, pack_context
from .answer.excerpts import Excerpt, choose_excerpts, query_terms
from .answer.leaks import SecretGuard, StreamCheck
from .answer.prompt import Turn
from .answer.rerank import Candidate, Reranked, make_reranker
from .answer.results import NOT_FOUND, PASSAGES_SHOWN, Answer, passage_blocks, passages_text
from .answer.selection import Selection
from .answer.trace import PLAYER_REASON, Mode, build_trace
from .dossier import Dossiers
from .index import annotate
from .index.index import Index
from .index.seam import Embeddings, Vectors, off_loop, question_step, search_concurrency
from .index.store import Store
from .llm import RERANK_SHARE, Deadline, LLMError, StreamCut, TextFn
from .retrieve import path_depth
from .retrieve.copies import sources_first
from .retrieve.entity import Matchers, entity_path
from .retrieve.evidence import gather_evidence, query_stems
from .retrieve.followup import expand_followup
from .retrieve.fusion import make_fusion
from .retrieve.keyword import TermCounts, keyword_path
from .retrieve.learned import load_ranker
from .retrieve.linked import linked_path
from .retrieve.results import Hit, Retrieval
from .retrieve.semantic import semantic_windows
from .types import Chunk, Scored, readable

StageFn = Callable[[str], Awaitable[None]]

# What a player reads when there is no written answer (PLAYER_REASON, in `answer.trace`): the same
# whatever happened, so a withheld answer looks like a model that did not answer, and no host, path
# or error reaches a player.
WITHHELD = "the answer repeated game-master-only notes"
# A stream cut before this many words of whole sentences is shown as passages instead: a sentence
# or two is not yet an answer.
MIN_PARTIAL_WORDS = 20
# The first reply when the deadline for the first words passed while the model was still loading.
LOADING = "The model is still loading; here are the passages meanwhile"
PLAYER_LOADING = "the model is still loading"  # a recap's passages say it in their own sentence
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|\]")

log = logging.getLogger(__name__)


@dataclass
class Fallbacks:
    """The answers this process gave as passages because the model did not answer (too slow, down,
    cut): how many, and the last one's question, reason and time, for a game master's status."""

    count: int = 0
    last: tuple[str, str, float] | None = None  # question, reason, time.time()

    def add(self, question: str, reason: str) -> None:
        self.count += 1
        self.last = (question, reason, time.time())


class Oracle:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.settings = index.settings
        self.matchers = Matchers(index)
        self.dossiers = Dossiers(index, self.matchers)
        # Shared by every campaign on one Ollama when the index was opened with its slots.
        self.llm_slots = index.llm_slots or asyncio.Semaphore(self.settings.llm_concurrency)
        self.search_slots = index.search_slots or asyncio.Semaphore(search_concurrency(self.settings))
        self._guard: tuple[str, SecretGuard] | None = None
        self.fallbacks = Fallbacks()  # answers given as passages because the model failed, in this process
        self._guard_lock = asyncio.Lock()
        settings = self.settings
        # Chosen once: how the paths' lists are fused, and what orders the pool. The learned fusion
        # reorders every candidate of the current fusion, so that one keeps them all; without a
        # readable model it is the current fusion.
        self.learned = settings.fusion == "learned"
        self.ranker = load_ranker(settings.fusion_model) if self.learned else None
        self.fuse = make_fusion(
            settings.fusion, weights=settings.path_weights, rrf_k=settings.rrf_k,
            limit=None if self.learned else settings.fused_pool,
        )
        self.reranker = make_reranker(
            settings.reranker, llm=index.llm, timeout=RERANK_SHARE * settings.first_words, slots=self.llm_slots,
            cross_encoder=settings.cross_encoder, cross_encoder_text=settings.cross_encoder_input == "text",
        )

    visibilities = staticmethod(readable)

    async def search(
        self,
        question: str,
        *,
        history: Sequence[str] = (),
        gm: bool = False,
        k: int | None = None,
        store: Store | None = None,
    ) -> Retrieval:
        """Retrieval alone. `store`: the snapshot of the question it is part of, else one of its own."""
        vectors = await self.index.vectors()
        embedder = await self.index.embedder()  # loaded once per process, not a cost of the question
        if store is not None:
            return await self._search(store, vectors, embedder, question, history, gm, k or self.settings.k)
        async with self.index.snapshot() as snapshot:
            return await self._search(snapshot, vectors, embedder, question, history, gm, k or self.settings.k)

    async def _search(
        self,
        store: Store,
        vectors: Vectors,
        embedder: Embeddings,
        question: str,
        history: Sequence[str],
        gm: bool,
        k: int,
    ) -> Retrieval:
        settings = self.settings
        depth = path_depth(k)
        visibilities = self.visibilities(gm)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        matcher, mention_stats = await self.matchers.lookup(gm, store)
        entities = matcher.find(question)
        query = expand_followup(question, history, names_entity=bool(entities))
        if query != question:
            entities = matcher.find(query)
        timings["expand"] = _ms(started)

        async def timed(name: str, coro) -> Scored:
            t = time.perf_counter()
            result = await coro
            timings[name] = _ms(t)
            return result

        query_vector = None
        windows: dict[str, tuple[float, ...]] = {}

        async def semantic() -> Scored:
            nonlocal query_vector  # kept: the passages' excerpts are matched against it too
            query_vector = await embedder.encode_query(query)
            found = await semantic_windows(store, vectors, embedder, query, visibilities, depth, query_vector)
            windows.update(found)
            return [(cid, sims[0]) for cid, sims in found]

        # Read by the keyword path, with the learned fusion's terms; reused by its evidence.
        stems = query_stems(query) if self.learned else {}
        counts = TermCounts(store, visibilities, also=stems.values())
        total = await mention_stats.indexed(store, visibilities)
        keyword, semantic, entity = await asyncio.gather(
            timed("keyword", keyword_path(
                store, query, visibilities, depth, (settings.fts_head_weight, 1.0), counts=counts, total=total
            )),
            timed("semantic", semantic()),
            timed("entity", entity_path(store, entities, visibilities, depth, stats=mention_stats)),
        )
        scored = {"keyword": keyword, "semantic": semantic, "entity": entity}

        t = time.perf_counter()
        fused = self.fuse(scored)
        timings["fusion"] = _ms(t)

        t = time.perf_counter()
        wanted = list(dict.fromkeys([f.id for f in fused] + [cid for hits in scored.values() for cid, _ in hits]))
        loaded, rowids = await store.chunks_and_rowids(wanted)
        chunks = {c.id: c for c in loaded}
        paths = {name: _hits(hits, chunks) for name, hits in scored.items()}
        timings["load"] = _ms(t)

        evidence = None
        if self.learned:
            t = time.perf_counter()
            seeds = [f.id for f in fused[:k]]
            evidence = await gather_evidence(
                store, stems, scored, windows, chunks, rowids, entities, fused, seeds, visibilities, mention_stats,
                counts,
            )
            timings["evidence"] = _ms(t)
            t = time.perf_counter()
            if self.ranker is not None:
                fused = self.ranker.rank(evidence, fused)
            fused = fused[: settings.fused_pool]
            timings["learned"] = _ms(t)
        fused_hits = sources_first([Hit(chunks[f.id], rank, f.score) for rank, f in enumerate(fused, 1) if f.id in chunks])

        t = time.perf_counter()
        seeds = [h.chunk.id for h in fused_hits[:k]]
        linked = await linked_path(store, seeds, visibilities, settings.linked, {h.chunk.label for h in fused_hits})
        linked_hits = _hits(linked, {c.id: c for c in await store.chunks_by_ids([cid for cid, _ in linked])})
        timings["linked"] = _ms(t)
        timings["total"] = _ms(started)
        return Retrieval(question, query, entities, paths, fused_hits, timings, linked_hits, query_vector, evidence)

    async def select(
        self, retrieval: Retrieval, k: int | None = None, *, store: Store | None = None, within: float | None = None,
    ) -> Selection:
        """Rerank the pool (fused, then linked) on its cached annotations and pack the context.
        `store`: the question's snapshot (the index served now, when left out); `within`: the seconds
        the rerank may take (its share of ORACLE_FIRST_WORDS_SECONDS, when left out)."""
        settings = self.settings
        k = k or settings.k
        pool = [h.chunk for h in retrieval.pool]
        store = store or await self.index.store()
        by_hash = await store.annotations_of([c.text_hash for c in pool], settings.model, annotate.PROMPT_VERSION)
        annotations = {c.id: by_hash[c.text_hash] for c in pool if c.text_hash in by_hash}
        candidates = [Candidate(c, annotations.get(c.id)) for c in pool]
        t = time.perf_counter()
        reranked = await self.reranker.rerank(retrieval.question, candidates, k, within=within)
        retrieval.timings_ms["rerank"] = _ms(t)
        by_id = {c.id: c for c in pool}
        final = [by_id[cid] for cid in reranked.order]
        context = pack_context(final, annotations, k=k, max_summaries=settings.max_summaries)
        return Selection(final, context, reranked, annotations)

    async def ask(
        self,
        question: str,
        *,
        history: Sequence[Turn] = (),
        gm: bool = False,
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
            return _cleared(self._answer(question, "Ask a question about the campaign.", "not_found",
                                         "empty question"), gm)
        await self._ready()
        deadline = Deadline.of(self.settings)
        started = time.perf_counter()
        async with self.index.snapshot() as store:  # every stage of the question reads one index
            return _cleared(await self._ask(store, question, history, gm, started, stage, show_text, deadline), gm)

    async def _ask(
        self,
        store: Store,
        question: str,
        history: Sequence[Turn],
        gm: bool,
        started: float,
        stage: StageFn,
        show_text: TextFn | None,
        deadline: Deadline,
    ) -> Answer:
        await stage("searching")
        user_turns = [t.content for t in history if t.role == "user"]
        async with self.search_slots:
            retrieval = await self.search(question, history=user_turns, gm=gm, store=store)
        if not retrieval.fused:
            return self._answer(question, NOT_FOUND, "not_found", "no passage matched", retrieval=retrieval)
        await self._start_loading(deadline)
        if self.settings.reranker == "llm" and self.llm_slots.locked():
            await stage("queued")
        await stage("ranking")
        selection = await self.select(retrieval, store=store, within=deadline.rerank_left())

        async def fallback(reason: str, extra: dict, t: float, loading: bool = False) -> Answer:
            return await self._failed(question, reason, retrieval, selection, extra, t, started, gm=gm,
                                      loading=loading)

        return await self._write(store, question, question, history, gm, started, stage, show_text,
                                 retrieval, selection, fallback, deadline)

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

    async def _write(
        self,
        store: Store,
        question: str,
        prompt: str,
        history: Sequence[Turn],
        gm: bool,
        started: float,
        stage: StageFn,
        show_text: TextFn | None,
        retrieval: Retrieval,
        selection: Selection,
        fallback: Callable[..., Awaitable[Answer]],
        deadline: Deadline,
    ) -> Answer:
        """The model writes the answer to `prompt` from the selection's context, streamed; its
        citations are checked and a player's answer is guarded against secrets. When the model gives
        nothing usable, `fallback(reason, trace, started writing, loading=…)` answers instead; so it
        does at once when the first words are not written by the deadline (`loading`: the model was
        still loading then). Once words flow, a pause of ORACLE_TOKEN_GAP_SECONDS or the end of
        ORACLE_ANSWER_TIMEOUT ends the answer on its last whole sentence."""
        llm = self.index.llm
        calls = int(selection.rerank.called) + 1  # the rerank call, if made, and the answer call
        window = await llm.window(max(deadline.left(), 0.001))
        # Counting a prompt's tokens is milliseconds of pure Python a question: off the event loop.
        fitted = await question_step(
            fit_answer_prompt, prompt, selection.context, history, num_ctx=window.num_ctx,
            reply_tokens=window.answer_tokens,
        )
        selection.context = context = fitted.context
        tokens = dict(fitted.tokens)
        extra: dict = {"llm_calls": calls, "tokens": tokens}
        guard = None if gm else await self.secret_guard(store)
        if guard is not None and show_text is not None:
            show_text = _unless_leaking(show_text, StreamCheck(guard))
        if self.llm_slots.locked():
            await stage("queued")
        t = time.perf_counter()
        incomplete = ""
        incomplete_shown = ""  # what a player reads of it: never a host or an error

        async def timed_text(text: str) -> None:
            # The trace's "first_words": milliseconds from the question to the first text written.
            retrieval.timings_ms.setdefault("first_words", _ms(started))
            if show_text is not None:
                await show_text(text)

        try:
            async with asyncio.timeout(deadline.left()):
                await self.llm_slots.acquire()
        except TimeoutError:
            return await self._late(deadline, extra, t, fallback,
                                    f"no model slot came free (ORACLE_LLM_CONCURRENCY={self.settings.llm_concurrency})")
        try:
            await stage("writing")
            try:
                reply = await llm.stream_chat(
                    fitted.messages, on_text=timed_text, timeout=deadline.whole_left(), first_text=deadline.left(),
                    token_gap=deadline.token_gap, num_predict=window.answer_tokens,
                )
                text = reply.text
                tokens.update({k: v for k, v in (("prompt_eval_count", reply.prompt_eval_count),
                                                 ("eval_count", reply.eval_count)) if v is not None})
                if not text.strip():
                    raise LLMError("the model gave an empty answer")
                if reply.done_reason == "length" and len(_whole_sentences(text).split()) >= MIN_PARTIAL_WORDS:
                    # The reply ran out of its budget mid-sentence: show the sentences it finished.
                    text = _whole_sentences(text)
                    incomplete = f"it reached its budget of {window.answer_tokens} tokens (ORACLE_ANSWER_TOKENS)"
                    incomplete_shown = incomplete
            except StreamCut as exc:
                why = _cut(exc, deadline)
                text = _whole_sentences(exc.partial)
                if len(text.split()) < MIN_PARTIAL_WORDS:
                    written = len(exc.partial.split())
                    reason = f"the answer stopped after {written} word{'' if written == 1 else 's'}: {why}"
                    return await fallback(reason, extra, t)
                incomplete = why
                incomplete_shown = incomplete if gm else "the language model stopped before the end"
                log.warning("answer to %r cut after %d words: %s", question, len(text.split()), why)
            except LLMError as exc:
                if exc.timed_out:  # nothing written by the deadline: the bound of the first words
                    return await self._late(deadline, extra, t, fallback)
                return await fallback(str(exc), extra, t)
        finally:
            self.llm_slots.release()
        retrieval.timings_ms["answer"] = _ms(t)
        verified, leaked = await question_step(_checked, text, context, guard)
        if leaked:
            # Players get the passages as if the model had failed: saying why would tell them a
            # secret lies there. The game master reads the reason in the log and in `status`.
            log.warning("withheld the answer to %r: it repeated game-master-only text (check the notes)", question)
            await self._record_withheld(question, WITHHELD)
            return await fallback(PLAYER_REASON, extra, t)
        retrieval.timings_ms["total"] = _ms(started)
        shown = verified.text
        if incomplete:
            extra["incomplete"] = incomplete
            shown = f"{shown}\n\n*(The answer stops here: {incomplete_shown}.)*"
        citations = {
            "shown": [c.label for c in verified.citations],
            "unknown": list(verified.unknown),
            "uncited_sentences": verified.uncited_sentences,
        }
        return self._answer(
            question, shown, "llm", "", retrieval=retrieval, selection=selection, citations=verified.citations,
            trace=extra | {"citations": citations},
        )

    async def _late(
        self, deadline: Deadline, extra: dict, t: float, fallback: Callable[..., Awaitable[Answer]], why: str = "",
    ) -> Answer:
        """The first words were not written by the deadline: the passages at once, saying so (and,
        to a player too, that the model is still loading when it is)."""
        loading = self.index.llm.loading
        reason = deadline.missed + (": the model is still loading" if loading else f": {why}" if why else "")
        return await fallback(reason, extra, t, loading=loading)

    async def _failed(
        self,
        question: str,
        reason: str,
        retrieval: Retrieval,
        selection: Selection,
        extra: dict,
        t: float,
        started: float,
        *,
        gm: bool,
        loading: bool = False,
    ) -> Answer:
        """The answer call gave nothing usable: the passages, with the reason."""
        retrieval.timings_ms["answer"] = _ms(t)
        retrieval.timings_ms["total"] = _ms(started)
        log.warning("answering %r without the LLM: %s", question, reason)
        if reason != PLAYER_REASON:  # a withheld answer is recorded as such (`_record_withheld`)
            self.fallbacks.add(question, reason)
        return await self._passages(question, reason, retrieval, selection, extra, gm=gm, loading=loading)

    async def _passages(
        self, question: str, reason: str, retrieval: Retrieval, selection: Selection, extra: dict, *, gm: bool,
        loading: bool = False,
    ) -> Answer:
        """The answer without the LLM's text: the best passages, each by the sentences that match the
        question, cited by the lines of those sentences. The text a player reads names no host,
        path or error: only that there is no answer, or that the model is still `loading`."""
        t = time.perf_counter()
        shown = await self.excerpts(retrieval, selection.context.fragments[:PASSAGES_SHOWN])
        timings = retrieval.timings_ms
        timings["excerpts"] = _ms(t)
        if "total" in timings:
            timings["total"] += timings["excerpts"]
        citations = tuple(Citation(e.chunk.label, e.chunk.path, e.start_line, e.end_line, e.chunk.sessions) for e in shown)
        if loading:
            intro = f"{LOADING} ({reason})." if gm else f"{LOADING}."
            text = "\n\n".join([intro, *passage_blocks(shown)])
        else:
            text = passages_text(reason if gm else PLAYER_REASON, shown)
        return self._answer(
            question, text, "passages", reason, retrieval=retrieval, selection=selection, citations=citations,
            trace=extra | {"excerpts": [e.to_json() for e in shown]},
        )

    async def _record_withheld(self, question: str, reason: str) -> None:
        """Kept in the index for the game master's `status`; never costs the player an answer."""
        try:
            store = await Store.open(self.settings.sqlite_path, create=False)
            try:
                await store.record_withheld(question, reason)
            finally:
                await store.close()
        except Exception:
            log.exception("could not record a withheld answer")

    async def excerpts(self, retrieval: Retrieval, chunks: Sequence[Chunk]) -> list[Excerpt]:
        """The sentences of each chunk that best match the question (`excerpts.choose_excerpts`),
        matched against the query vector the semantic path already computed; off the event loop."""
        embedder = await self.index.embedder()
        terms = query_terms(retrieval.search_query, [e.name for e in retrieval.entities])

        model = embedder.in_thread  # `similarity` runs in the question's lane with `choose_excerpts`

        def similarity(texts: Sequence[str]) -> list[float]:
            query = retrieval.query_vector
            if query is None:
                query = model.encode_query(retrieval.search_query)
            return [float(model.encode_query(text) @ query) for text in texts]

        return await question_step(choose_excerpts, chunks, terms, similarity)

    def _answer(
        self,
        question: str,
        text: str,
        mode: Mode,
        reason: str,
        *,
        retrieval: Retrieval | None = None,
        selection: Selection | None = None,
        citations: tuple[Citation, ...] = (),
        trace: dict | None = None,
    ) -> Answer:
        """`trace`: what the answer stage adds to the stages' own record (see `answer.trace`)."""
        record = build_trace(mode, reason, retrieval, selection, self.settings.reranker, **(trace or {}))
        fragments = selection.context.fragments if selection else ()
        summaries = selection.context.headlines if selection else ()
        return Answer(question, text, mode, reason, citations, fragments, summaries, record)

    async def recap(
        self,
        session: str | None = None,
        *,
        gm: bool = False,
        on_stage: StageFn | None = None,
        on_text: TextFn | None = None,
    ) -> Answer:
        """"Previously on…": the last session (or the one `session` names: "12", "Session 12", a word
        of its title) retold from the text its reader may read, cited like an answer. Without the
        model, the session's annotation and opening lines as passages."""
        deadline = Deadline.of(self.settings)
        started = time.perf_counter()
        stage, show_text = _stager(on_stage), _shower(on_text, f"recap {session or ''}")
        async with self.index.snapshot() as store:
            parts = pick_session(await store.session_chunks(self.visibilities(gm)), session)
            if not parts:
                text = f"The notes hold no session matching “{session}”." if session else "The notes hold no session yet."
                return _cleared(self._answer(f"Recap of {session or 'the last session'}", text, "not_found",
                                             "no session"), gm)
            label = parts[0].label
            question = f"Recap of {label}"
            prompt = (f"Previously on… Retell {label} for the players: what happened, in order, in a few "
                      "short paragraphs, citing the session after every claim.")
            annotations = await self._annotations(store, parts)
            fragments = tuple(parts[: self.settings.k])
            selection = Selection(
                list(fragments), Context(fragments, ()),
                Reranked([c.id for c in fragments], False, "recap: the session in note order", []), annotations,
            )
            retrieval = Retrieval(question, question, [], {}, [])
            await self._start_loading(deadline)
            await stage("writing")

            async def fallback(reason: str, extra: dict, t: float, loading: bool = False) -> Answer:
                log.warning("recap of %s without the LLM: %s", label, reason)
                shown = reason if gm else PLAYER_LOADING if loading else PLAYER_REASON
                return self._session_passages(question, shown, parts, annotations, retrieval, selection, extra)

            return _cleared(await self._write(store, question, prompt, (), gm, started, stage, show_text,
                                              retrieval, selection, fallback, deadline), gm)

    def _session_passages(
        self, question: str, reason: str, parts: Sequence[Chunk], annotations: dict[str, str],
        retrieval: Retrieval, selection: Selection, extra: dict,
    ) -> Answer:
        first = parts[0]
        offset, opening = opening_lines(first.text.splitlines())
        start = first.start_line + offset
        end = start + max(len(opening), 1) - 1
        summary = annotations.get(first.id)
        blocks = [f"The Oracle could not write the recap ({reason}). {first.label} in the notes:"]
        if summary:
            blocks.append(f"*{summary}*")
        blocks.append(f"[{first.label}] ({first.path}, lines {start}–{end})\n> " + "\n> ".join(opening))
        citation = Citation(first.label, first.path, start, end, first.sessions)
        return self._answer(question, "\n\n".join(blocks), "passages", reason, retrieval=retrieval,
                            selection=selection, citations=(citation,), trace=extra)

    async def _annotations(self, store: Store, chunks: Sequence[Chunk]) -> dict[str, str]:
        by_hash = await store.annotations_of([c.text_hash for c in chunks], self.settings.model, annotate.PROMPT_VERSION)
        return {c.id: by_hash[c.text_hash] for c in chunks if c.text_hash in by_hash}

    async def cited(self, citations: Sequence[Citation], *, gm: bool) -> list[CitedText]:
        """What each citation points at, read again from the index as it is now and only as far as
        the reader's clearance goes: the lines of a public chunk, a secret's chunk for a game master.
        A citation whose text the reader may not read (or that is gone) comes back with no text."""
        out: list[CitedText] = []
        async with self.index.snapshot() as store:
            for c in citations:
                chunks = await store.chunks_at(c.path, c.start_line, c.end_line, self.visibilities(gm))
                chunks = [ch for ch in chunks if ch.label == c.label] or chunks
                out.append(CitedText(c, cited_lines(chunks, c.start_line, c.end_line)))
        return out

    async def secret_guard(self, store: Store) -> SecretGuard:
        """The guard of `store`'s index: built once per committed ingest, off the event loop, by one
        question while the others wait."""
        async with self._guard_lock:
            generation = await store.generation()
            if self._guard is None or self._guard[0] != generation:
                self._guard = (generation, await question_step(SecretGuard, await store.chunk_texts()))
            return self._guard[1]


def _cleared(answer: Answer, gm: bool) -> Answer:
    """The answer marked with its reader's clearance: `Answer.to_json()` for a player names no host,
    path or error (the answer keeps them, for the game master and the log)."""
    return replace(answer, gm=gm)


def _hits(scored: Scored, chunks: dict[str, Chunk]) -> list[Hit]:
    """A path's (id, score) list as ranked hits, 1-based, over the chunks that could be loaded."""
    return [Hit(chunks[cid], rank, score) for rank, (cid, score) in enumerate(scored, 1) if cid in chunks]


def _checked(text: str, context: Context, guard: SecretGuard | None) -> tuple[Verified, bool]:
    """The answer's citations verified, and whether it repeats game-master-only text (`guard`: a
    player's question)."""
    verified = verify(text, context)
    return verified, guard is not None and guard.leaks(verified.text)


def _cut(exc: StreamCut, deadline: Deadline) -> str:
    """Why a stream that had begun stopped, naming the setting that bounded it."""
    if exc.bound == "gap":
        return f"the model wrote nothing for {deadline.token_gap:g} s (ORACLE_TOKEN_GAP_SECONDS)"
    if exc.bound == "whole":
        return f"the answer was still being written {deadline.whole:g} s after the question (ORACLE_ANSWER_TIMEOUT)"
    return str(exc)


def _whole_sentences(text: str) -> str:
    """A cut reply up to its last whole sentence or closed citation: no half label is ever shown."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].rstrip() if ends else ""


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


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
            log.warning("showing the answer to %r as it is written failed; it is shown when done", what,
                        exc_info=True)
            show.clear()

    return show_text


def _unless_leaking(show_text: TextFn, check: StreamCheck) -> TextFn:
    """A player sees the answer as it is written only while it repeats no secret: from the first
    text that does, nothing more is shown, and the finished answer is withheld."""

    async def show(text: str) -> None:
        if not check.leaks(text):
            await show_text(text)

    return show


@dataclass(frozen=True)
class CitedText:
    citation: Citation
    text: str  # empty: nothing there the reader may read


def cited_lines(chunks: Sequence[Chunk], start: int, end: int) -> str:
    """The lines `start`–`end` of the file, from the chunks that hold them. A public chunk's text is
    its file lines; a secret's chunk (joined secrets, lines no longer the file's) is shown whole."""
    pieces: list[str] = []
    seen: set[int] = set()
    for chunk in chunks:
        lines = chunk.text.splitlines()
        if chunk.end_line - chunk.start_line + 1 != len(lines):
            pieces.append(chunk.text.strip())
            continue
        for number in range(max(start, chunk.start_line), min(end, chunk.end_line) + 1):
            if number not in seen:
                seen.add(number)
                pieces.append(lines[number - chunk.start_line])
    return "\n".join(pieces).strip()


OPENING_WORDS = 60


def opening_lines(lines: Sequence[str], words: int = OPENING_WORDS) -> tuple[int, list[str]]:
    """Where a passage's opening starts (0-based line) and its lines: the heading and blank lines
    before the text left out, then whole lines until `words` words are shown."""
    first = 0
    while first < len(lines) - 1 and (not lines[first].strip() or lines[first].lstrip().startswith("#")):
        first += 1
    shown: list[str] = []
    count = 0
    for line in lines[first:]:
        if count >= words:
            break
        shown.append(line)
        count += len(line.split())
    while shown and not shown[-1].strip():
        shown.pop()
    return first, shown


_SESSION_NUMBER = re.compile(r"(\d+)")


def pick_session(chunks: Sequence[Chunk], wanted: str | None) -> list[Chunk]:
    """The parts of one session note (or hub section): the highest-numbered one, or the one `wanted`
    names by number ("12", "Session 12") or by a word of its label or heading."""
    sessions: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        sessions.setdefault(chunk.label, []).append(chunk)

    def number(label: str) -> tuple[int, str]:
        return max((n for c in sessions[label] for n in c.sessions), default=-1), label

    if not sessions:
        return []
    if wanted and wanted.strip():
        text = " ".join(wanted.split()).casefold()
        digits = _SESSION_NUMBER.search(text)
        if exact := [label for label in sessions if label.casefold() == text]:
            matches = exact
        elif digits:
            matches = [label for label, parts in sessions.items()
                       if any(int(digits.group(1)) in c.sessions for c in parts)]
        else:
            matches = [label for label, parts in sessions.items()
                       if text in label.casefold() or any(text in p.heading.casefold() for p in parts)]
        if not matches:
            return []
        label = max(matches, key=number)
    else:
        label = max(sessions, key=number)
    return sorted(sessions[label], key=lambda c: (c.path, c.start_line, c.part))
