"""`fit_answer_prompt`: what goes, in which order, when the prompt is over the window. Pure."""
from __future__ import annotations

from oracle.answer.budget import TRIMMED, fit_answer_prompt
from oracle.answer.context import Context, Headline
from oracle.answer.prompt import SYSTEM, Turn, build_answer_prompt
from oracle.tokens import message_tokens
from oracle.types import Chunk

QUESTION = "What did the harbourmaster do?"
REPLY = 100


def chunk(n: int, paragraphs: int = 3) -> Chunk:
    text = "\n\n".join(f"Paragraph {p} of session {n} tells of the harbour and its ledgers." for p in range(paragraphs))
    return Chunk(
        id=f"c{n}", path=f"sessions/Session {n}.md", label=f"Session {n}", kind="session", part=1, parts=1,
        heading=f"Session {n}", start_line=1, end_line=1 + text.count("\n"), text=text, text_hash=f"h{n}",
    )


FRAGMENTS = tuple(chunk(n) for n in range(1, 5))
SUMMARIES = tuple(Headline(chunk(n), f"Headline of session {n}.") for n in range(10, 14))
HISTORY = (Turn("user", "Who is the harbourmaster?"), Turn("assistant", "Orrin Hale keeps the harbour."))


def size(fragments=FRAGMENTS, summaries=SUMMARIES, history=HISTORY) -> int:
    return message_tokens(build_answer_prompt(QUESTION, Context(tuple(fragments), tuple(summaries)), history))


def fit(num_ctx: int):
    return fit_answer_prompt(QUESTION, Context(FRAGMENTS, SUMMARIES), HISTORY, num_ctx=num_ctx, reply_tokens=REPLY)


def labels(items) -> list[str]:
    return [getattr(i, "label", None) or i.chunk.label for i in items]


def assert_rules_and_question_kept(fitted) -> None:
    assert fitted.messages[0] == {"role": "system", "content": SYSTEM}
    assert fitted.messages[-1]["content"].endswith(f"\n\nQuestion: {QUESTION}")


def test_a_prompt_that_fits_is_sent_whole_and_counted():
    fitted = fit(size() + REPLY)

    assert fitted.context == Context(FRAGMENTS, SUMMARIES)
    assert fitted.history == HISTORY
    assert fitted.messages == build_answer_prompt(QUESTION, fitted.context, HISTORY)
    tokens = fitted.tokens.to_json()
    assert (tokens["num_ctx"], tokens["budget"], tokens["total"]) == (size() + REPLY, size(), size())
    assert tokens["dropped"] == {"headlines": [], "fragments": [], "trimmed": None}
    assert all(tokens[part] > 0 for part in ("system", "question", "history", "fragments", "headlines"))
    assert tokens["system"] + tokens["question"] + tokens["history"] + tokens["fragments"] + tokens["headlines"] <= size()


def test_headlines_go_first_the_last_one_first():
    fitted = fit(size(summaries=SUMMARIES[:2]) + REPLY)

    assert labels(fitted.context.headlines) == ["Session 10", "Session 11"]
    assert fitted.context.fragments == FRAGMENTS and fitted.history == HISTORY
    assert vars(fitted.tokens.dropped) == {"headlines": ["Session 13", "Session 12"], "fragments": [], "trimmed": None}
    assert fitted.tokens.total <= fitted.tokens.budget
    assert_rules_and_question_kept(fitted)


def test_then_the_oldest_history_then_the_lowest_fragments():
    fitted = fit(size(summaries=(), history=HISTORY[1:]) + REPLY)
    assert (fitted.history, fitted.context.fragments) == (HISTORY[1:], FRAGMENTS)
    assert fitted.tokens.dropped.headlines == ["Session 13", "Session 12", "Session 11", "Session 10"]

    fitted = fit(size(fragments=FRAGMENTS[:2], summaries=(), history=()) + REPLY)
    assert (fitted.history, fitted.context.fragments, fitted.context.headlines) == ((), FRAGMENTS[:2], ())
    assert fitted.tokens.dropped.fragments == ["Session 4", "Session 3"]
    assert fitted.tokens.dropped.trimmed is None
    assert fitted.tokens.history == 0
    assert_rules_and_question_kept(fitted)


def test_last_the_one_fragment_left_is_trimmed_at_a_paragraph():
    two_paragraphs = Chunk(**{**chunk(1).__dict__, "text": chunk(1).text.rsplit("\n\n", 1)[0]})
    budget = size(fragments=[two_paragraphs], summaries=(), history=()) + 4  # the marker's room
    fitted = fit(budget + REPLY)

    [trimmed] = fitted.context.fragments
    assert trimmed.text == two_paragraphs.text + "\n" + TRIMMED
    assert (trimmed.label, trimmed.start_line, trimmed.end_line) == ("Session 1", 1, 3)  # the lines it still holds
    assert vars(fitted.tokens.dropped) == {
        "headlines": ["Session 13", "Session 12", "Session 11", "Session 10"],
        "fragments": ["Session 4", "Session 3", "Session 2"],
        "trimmed": "Session 1",
    }
    assert fitted.tokens.total <= budget
    assert_rules_and_question_kept(fitted)


def test_the_rules_and_the_question_are_never_cut_even_when_they_alone_are_over():
    fitted = fit(size(fragments=(), summaries=(), history=()) - 10 + REPLY)

    assert fitted.context == Context((), ())
    assert fitted.tokens.total > fitted.tokens.budget  # said, not hidden
    assert_rules_and_question_kept(fitted)


def test_the_rerank_prompt_leaves_out_its_lowest_candidates_to_fit():
    from oracle.answer.rerank import Candidate, fit_candidates, rerank_messages

    candidates = [Candidate(chunk(n), f"Annotation {n}: " + "a long description of the session " * 5) for n in range(40)]
    whole = message_tokens(rerank_messages(QUESTION, candidates, 8))
    ten = message_tokens(rerank_messages(QUESTION, candidates[:10], 8))

    assert fit_candidates(QUESTION, candidates, 8, whole) == candidates
    assert fit_candidates(QUESTION, candidates, 8, ten) == candidates[:10]
    assert fit_candidates(QUESTION, candidates, 8, ten - 1) == candidates[:9]
    assert fit_candidates(QUESTION, candidates, 8, 0) == candidates[:1]  # never none


def test_the_annotation_prompt_cuts_its_passage_at_a_paragraph_to_fit():
    from oracle.index.annotate import annotation_messages

    long = Chunk(**{**chunk(1).__dict__, "text": chunk(1, paragraphs=60).text})
    whole = annotation_messages(long)
    budget = message_tokens(whole) // 2

    cut = annotation_messages(long, budget)
    assert message_tokens(cut) <= budget
    passage = cut[1]["content"].split(":\n\n", 1)[1].split("\n\nReply in JSON", 1)[0]
    assert long.text.startswith(passage) and long.text[len(passage):].startswith("\n\nParagraph")
    assert annotation_messages(long, message_tokens(whole)) == whole
