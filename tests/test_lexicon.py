"""The lexicon: recall finds a memory written in other words (the other language, a synonym),
and still prefers the memory in the user's own words."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from memstore.recall.keyword import keyword_recall
from memstore.recall.lexicon import lexicon
from memstore.recall.tokens import token_sequence
from memstore.storage.store import MemoryStore


def names(store: MemoryStore, text: str) -> list[str]:
    return [hit.memory.name for hit in keyword_recall(store, text)]


def test_a_chinese_question_finds_an_english_memory(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create(
            "feedback-no-console-changes",
            "feedback",
            "Never change cloud settings by hand in the console",
            "Every change goes through Terraform, or the next plan reverts it.",
        )
        tx.create("project-fonts", "project", "Fonts are bundled", "We ship Inter and Noto.")
    # Not one token in common with the memory: only the glossary connects them.
    assert names(store, "我刚才在控制台里手动改了安全组") == ["feedback-no-console-changes"]


def test_an_english_question_finds_a_chinese_memory(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create(
            "orderhub-release",
            "project",
            "订单中心的部署流程",
            "先在预发环境验证，再发布到生产环境。",
        )
        tx.create("project-fonts", "project", "Fonts are bundled", "We ship Inter and Noto.")
    assert names(store, "how do we deploy to the staging environment?")[0] == "orderhub-release"


def test_a_synonym_finds_the_memory(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create("anna-necklace", "user", "Anna's grandmother gave her a necklace", "In May.")
        tx.create("anna-bike", "user", "Anna bought a bike", "A red one.")
        tx.create("anna-trip", "user", "Anna went to Sweden", "With her sister.")
    assert names(store, "What did Anna get from her grandma?")[0] == "anna-necklace"


def test_an_equivalent_weighs_as_the_users_own_word(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create("repo-backup", "project", "The repo backup runs nightly", "To the NAS.")
        tx.create(
            "repository-backup", "project", "The repository backup runs nightly", "To the NAS."
        )
        tx.create("fonts", "project", "Fonts are bundled", "Inter and Noto.")
        tx.create("ports", "project", "The API listens on 8080", "And 8443 for TLS.")
    hits = keyword_recall(store, "is the repo backed up?")
    scores = {h.memory.name: h.score for h in hits}
    assert set(scores) == {"repo-backup", "repository-backup"}
    # The same text in the other word, as rare in the store: the same score.
    assert scores["repository-backup"] == pytest.approx(scores["repo-backup"])
    matched = {h.memory.name: h.matched for h in hits}
    assert "repository (for repo)" in matched["repository-backup"]


def test_an_equivalent_does_not_lift_a_memory_over_the_floor_by_itself(
    store: MemoryStore,
) -> None:
    # One term of four in common, through an equivalent, in the body: below the floor, as
    # it would be in the user's own words.
    store.create("notes", "project", "Assorted notes", "The repository moved.")
    assert names(store, "repo tonight quickly somewhere") == []


def test_the_longest_phrase_is_taken_and_each_once() -> None:
    found = lexicon().expansions("单元测试写好了，测试也跑了，再跑一次单元测试")
    # In the order they were said last: 测试 in the middle, 单元测试 at the end.
    sources = [e.source.text for e in found]
    assert sources[:2] == ["测试", "单元测试"]
    assert len(sources) == len(set(sources))
    assert found[1].source.query == "单元 元测 测试"  # as the index holds it
    english = lexicon().expansions("open a pull request for the deploying change")
    assert {"pull request", "deploy"} <= {e.source.text for e in english}
    assert tuple(token_sequence("deploy")) in [e.source.tokens for e in english]


@pytest.mark.parametrize("name", ["glossary_zh_en.tsv", "synonyms_en.txt"])
def test_the_word_lists_are_well_formed(name: str) -> None:
    text = resources.files("memstore.recall").joinpath("data", name).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) > 300
    keys = set()
    for line in lines:
        if name.endswith(".tsv"):
            chinese, english = line.split("\t")
            assert re.fullmatch("[\u4e00-\u9fff]{2,6}", chinese), line
            phrases = english.split("; ")
            assert chinese not in keys, line
            keys.add(chinese)
        else:
            phrases = line.split(", ")
            assert len(phrases) >= 2, line
        for phrase in phrases:
            assert re.fullmatch(r"[a-z0-9][a-z0-9 \-]*", phrase), line
            assert token_sequence(phrase), line  # every phrase is something the index holds


def test_two_words_of_the_text_that_mean_the_same_count_once(store: MemoryStore) -> None:
    store.create("l10n-files", "project", "UI strings live in ARB files", "Run gen-l10n.")
    # difference, String/str, Rust: one of three in common is below the floor, though the
    # memory has the word "String" and the equivalent of "str".
    assert names(store, "what's the difference between String and str in Rust?") == []


def test_a_phrase_counts_as_the_words_it_is_made_of(store: MemoryStore) -> None:
    store.create("user-habits", "user", "Write the failing test first", "Then the code.")
    # "test first" is one term of the lexicon but two of the text's five words: enough to
    # clear the floor, as the two words would be.
    assert names(store, "test first for the new parser module") == ["user-habits"]
    [hit] = keyword_recall(store, "test first for the new parser module")
    assert hit.matched == ("test first",)


def test_part_of_a_phrase_counts_for_what_it_has(store: MemoryStore) -> None:
    store.create("project-layout", "project", "Parser tests live in tests/parser", "Run them.")
    # "unit test" is one term of weight two; the memory has "test" (and "parser"): two of
    # three words, not one.
    [hit] = keyword_recall(store, "unit test for the parser")
    assert hit.memory.name == "project-layout" and set(hit.matched) == {"test", "parser"}


def test_part_of_a_han_word_is_another_word(store: MemoryStore) -> None:
    # 合并 (merge) and 请求 (request) are in the memory, 合并请求 (pull request) is not.
    store.create("batching", "project", "合并多个 HTTP 请求以减少开销", "用批量接口。")
    assert names(store, "合并请求") == []


def test_an_equivalent_made_of_stopwords_is_not_searched(store: MemoryStore) -> None:
    # "down" is an equivalent of "broken" in the word lists, and a stopword of recall.
    store.create("staging-schedule", "project", "Staging goes down every Sunday", "For backups.")
    assert names(store, "the worker is broken again") == []


def test_the_newest_words_keep_their_equivalents_in_a_long_text(store: MemoryStore) -> None:
    store.create(
        "feedback-no-console-changes",
        "feedback",
        "Never change cloud settings by hand in the console",
        "Every change goes through Terraform.",
    )
    older = " ".join(f"filler{i}" for i in range(40))
    newest = "我刚才在控制台里手动改了安全组"
    assert names(store, f"{older}\n{newest}") == ["feedback-no-console-changes"]


def test_a_word_said_alone_and_in_a_phrase_counts_the_same_in_either_order(
    store: MemoryStore,
) -> None:
    store.create("login-test", "project", "The login test is flaky", "Retry it once.")
    first = keyword_recall(store, "the login test broke; write a unit test")
    second = keyword_recall(store, "write a unit test; the login test broke")
    assert (
        [set(h.matched) for h in first] == [set(h.matched) for h in second] == [{"login", "test"}]
    )


def test_the_lexicon_is_built_once_for_threads_that_ask_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    import memstore.recall.lexicon as module

    builds = []
    build = module._build

    def counted() -> module.Lexicon:
        builds.append(1)
        return build()

    monkeypatch.setattr(module, "_loaded", None)
    monkeypatch.setattr(module, "_stored", lambda: None)  # as when the lists changed
    monkeypatch.setattr(module, "_build", counted)
    got: list[module.Lexicon] = []
    threads = [threading.Thread(target=lambda: got.append(lexicon())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and all(one is got[0] for one in got)


def test_the_stored_lexicon_is_what_building_gives() -> None:
    import memstore.recall.lexicon as module

    stored = module._stored()
    assert stored is not None, "data/lexicon.json is stale: python -m memstore.recall.lexicon"
    assert stored == module._build()


def test_a_stored_lexicon_of_other_lists_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import memstore.recall.lexicon as module

    monkeypatch.setattr(module, "_lists_digest", lambda: "crc32:00000000")
    assert module._stored() is None


def test_a_stored_lexicon_cut_short_is_not_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import memstore.recall.lexicon as module

    whole = module._data_file(module.STORED).read_text(encoding="utf-8")
    lists = {name: module._data_file(name) for name in module.LISTS}
    cut = tmp_path / module.STORED
    monkeypatch.setattr(module, "_data_file", lambda name: lists.get(name, cut))
    for text in (whole[: len(whole) // 2], whole.replace('"by_first_token":{', "")):
        cut.write_text(text, encoding="utf-8")
        assert module._stored() is None  # built from the lists instead
    cut.write_text(whole, encoding="utf-8")
    assert module._stored() == module._build()


def test_a_word_said_early_and_again_last_is_a_new_word(store: MemoryStore) -> None:
    store.create("grafana-admin", "reference", "Grafana admin login", "In the team vault.")
    filler = " ".join(f"filler{i}" for i in range(31))
    earlier = "first question about grafana dashboards."
    assert names(store, f"{earlier}\n{filler}\nnow: where is the grafana login?") == [
        "grafana-admin"
    ]


def test_an_equivalent_that_is_part_of_the_phrase_is_not_the_phrase(store: MemoryStore) -> None:
    # "conflict" alone is one word of "merge conflict", not a merge conflict.
    store.create("calendar", "user", "Avoid a scheduling conflict with standup", "After 10.")
    assert names(store, "merge conflict after the rebase") == []


def test_words_said_in_both_languages_count_the_same_in_either_order(store: MemoryStore) -> None:
    store.create("console-quota", "project", "The cloud console shows quota usage", "Per team.")
    first = keyword_recall(store, "控制台 console quota errors")
    second = keyword_recall(store, "console 控制台 quota errors")
    assert [(h.memory.name, set(h.matched)) for h in first] == [
        (h.memory.name, set(h.matched)) for h in second
    ]
    assert [h.memory.name for h in first] == ["console-quota"]


def test_markdown_bold_is_no_prefix_search(store: MemoryStore) -> None:
    store.create("deploys", "project", "Releases are deploying from CI now", "Since May.")
    plain = keyword_recall(store, "how are releases deploying now?")
    bold = keyword_recall(store, "how are **releases** **deploying** now?")
    italic = keyword_recall(store, "how are *releases* *deploying* now?")
    assert [h.memory.name for h in bold] == [h.memory.name for h in plain] == ["deploys"]
    assert [h.matched for h in italic] == [h.matched for h in plain]
    # A real prefix search is credited through the stem: deploying* is deploi*.
    assert keyword_recall(store, "deploying* releases")[0].matched == ("deploying*", "releases")


def test_words_that_share_a_stem_are_told_apart_by_the_word_typed() -> None:
    # generate and generics, terminal and terminate, developer and development are one
    # porter stem each: the word the text has says which entry is meant.
    def equivalents(text: str) -> list[str]:
        return [e.text for expansion in lexicon().expansions(text) for e in expansion.equivalents]

    assert "泛型" in equivalents("generics") and "泛型" not in equivalents("generate")
    assert "终端" in equivalents("terminal") and "终端" not in equivalents("terminate")
    assert "开发者" in equivalents("developers") and "开发者" not in equivalents("development")
    # A word of the lists ending in -ed is no sense of its verb: "managed" (托管, hosted)
    # is not what "manage the cluster" means, nor "distributed" (分布式) "distribute".
    assert "托管" not in equivalents("manage the cluster") + equivalents("managing")
    assert "分布式" not in equivalents("distribute the binaries")
    assert "分布式" in equivalents("distributed systems")
    # Inflections of one word are one entry.
    assert equivalents("kid") == equivalents("kids") and "children" in equivalents("kids")
    assert "documentation" in equivalents("where are the docs")


def test_a_word_with_many_synonyms_keeps_its_translation() -> None:
    [release] = lexicon().expansions("release")
    texts = [e.text for e in release.equivalents]
    assert any(t.isascii() for t in texts) and any(not t.isascii() for t in texts)


def test_a_phrase_said_in_both_languages_counts_the_same_in_either_order(
    store: MemoryStore,
) -> None:
    with store.transaction() as tx:
        tx.create("en-quota", "project", "Cloud service quotas are set per team", "Ask ops.")
        tx.create("zh-quota", "project", "云服务配额按团队分配", "找运维。")
    first = keyword_recall(store, "cloud service 云服务 quota")
    second = keyword_recall(store, "云服务 cloud service quota")
    # The same terms, weights and credit (two memories alone tie on bm25: no order here).
    assert {(h.memory.name, frozenset(h.matched)) for h in first} == {
        (h.memory.name, frozenset(h.matched)) for h in second
    }
    # The user's own words are shown as theirs, not as an equivalent.
    assert "cloud service" in first[[h.memory.name for h in first].index("en-quota")].matched


def test_a_word_sharing_a_bigram_with_an_unsaid_equivalent_is_its_own_word(
    store: MemoryStore,
) -> None:
    # 全文搜索 has the equivalent 全文检索, which contains 检索; the user's 检索 (retrieval)
    # is still a word of its own, with its own equivalents.
    store.create("retrieval", "project", "Retrieval timeouts come from the vector index", "x")
    [hit] = keyword_recall(store, "全文搜索之外，检索超时了")
    assert "retrieval (for 检索)" in hit.matched


def test_everyday_words_find_the_memory_as_technical_ones_do(store: MemoryStore) -> None:
    # A newcomer's first question: weekdays and time words are in the glossary as deploy is.
    store.create(
        "project-deploy",
        "project",
        "Deployment goes through the release workflow; never push to main on Fridays",
        "The team freezes deploys on Fridays.",
    )
    store.create("project-fonts", "project", "Fonts are bundled", "Inter and Noto.")
    assert names(store, "can we deploy on friday") == ["project-deploy"]
    assert names(store, "周五可以部署吗") == ["project-deploy"]
    assert names(store, "星期五能上线吗") == ["project-deploy"]
