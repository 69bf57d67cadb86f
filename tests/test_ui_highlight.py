"""The words a search matched, marked in the text as the index matched them: porter stems,
Han bigrams inside longer runs, prefixes; an excerpt around the first one; and the text
around them still escaped."""

from __future__ import annotations

import re

from memstore.ui.highlight import Query, excerpt, marked


def marks(html: str) -> list[str]:
    return re.findall(r"<mark>(.*?)</mark>", html)


def test_a_word_is_marked_in_every_form_the_index_stems_alike() -> None:
    html = marked("Deploying: we deployed the deployment. Redeploy?", Query.of("deploy"))
    assert marks(html) == ["Deploying", "deployed"]  # porter: deployment, redeploy differ


def test_a_han_bigram_is_marked_inside_a_longer_run() -> None:
    html = marked("自动部署流程，部署了", Query.of("部署"))
    assert marks(html) == ["部署", "部署"]
    assert marks(marked("自动部署流程", Query.of("自动部署"))) == ["自动部署"]  # one span


def test_a_prefix_search_marks_what_starts_with_it() -> None:
    assert marks(marked("migrate the migrations, not grim", Query.of("migr*"))) == [
        "migrate",
        "migrations",
    ]


def test_stopwords_and_nothing_mark_nothing() -> None:
    assert marks(marked("the how of it", Query.of("the how"))) == []
    assert str(marked("<b>", Query.of(""))) == "&lt;b&gt;"


def test_marked_text_stays_escaped() -> None:
    html = str(marked("<script>deploy</script>", Query.of("deploy")))
    assert html == "&lt;script&gt;<mark>deploy</mark>&lt;/script&gt;"


def test_an_excerpt_is_around_the_first_match() -> None:
    body = "filler " * 100 + "the deploy step " + "more " * 100
    html = str(excerpt(body, Query.of("deploy"), chars=60))
    assert html.startswith("…") and html.endswith("…")
    assert marks(html) == ["deploy"]
    assert len(re.sub(r"<[^>]+>", "", html)) <= 62
    assert str(excerpt("short deploy", Query.of("deploy"))) == "short <mark>deploy</mark>"
