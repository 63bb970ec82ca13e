"""The semantic cache's index (partitions, TTL, LRU bound, the two-stage search) and its lexical check."""
from __future__ import annotations

import numpy as np

from vsr_fast.events import semantic_index as si


def unit(rng, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_stays_in_its_partition_and_ranks_by_cosine():
    rng = np.random.default_rng(0)
    v = unit(rng, 3)
    index = si.SemanticIndex(16, 10)
    index.add("alice", "a", "first", v[0], 60)
    index.add("bob", "b", "second", v[0], 60)
    index.add("alice", "c", "third", (v[0] + 0.3 * v[1]) / np.linalg.norm(v[0] + 0.3 * v[1]), 60)
    hits = index.search("alice", v[0], 3, None)
    assert [h[1] for h in hits] == ["a", "c"] and hits[0][0] > hits[1][0]
    assert [h[1] for h in index.search("alice", v[0], 3, 0.999)] == ["a"]
    assert index.search("carol", v[0], 3, None) == []


def test_expired_rows_are_never_returned_and_the_bound_drops_the_least_recently_stored():
    rng = np.random.default_rng(1)
    v = unit(rng, 4)
    index = si.SemanticIndex(16, 2, initial=1)
    index.add("p", "old", "x", v[0], -1)              # already past its TTL
    assert index.search("p", v[0], 1, None) == []
    index.add("p", "k1", "x", v[1], 60)
    index.add("p", "k2", "x", v[2], 60)               # full: "old" leaves
    index.add("p", "k3", "x", v[3], 60)               # full: k1 leaves
    assert len(index) == 2
    assert {h[1] for h in index.search("p", v[1], 5, None)} == {"k2", "k3"}
    index.add("p", "k2", "x", v[1], 60)               # the same key again: its row is replaced
    assert len(index) == 2 and index.search("p", v[1], 1, None)[0][1] == "k2"


def test_the_two_stage_search_finds_what_the_exact_scan_finds():
    rng = np.random.default_rng(2)
    v = unit(rng, si.COARSE_FROM + 500, 64)
    fast = si.SemanticIndex(64, len(v), axes=si.projection(64))
    exact = si.SemanticIndex(64, len(v))
    for i, row in enumerate(v):
        fast.add("p", str(i), "t", row, 60)
        exact.add("p", str(i), "t", row, 60)
    for i in range(0, len(v), 97):
        q = v[i] + 0.2 * unit(rng, 1, 64)[0]
        q /= np.linalg.norm(q)
        assert [h[1] for h in fast.search("p", q, 3, 0.5)] == [h[1] for h in exact.search("p", q, 3, 0.5)]


def test_the_lexical_check_drops_polarity_flips_and_swapped_subjects_and_keeps_paraphrases():
    assert si.differs("How do I enable 2FA?", "How do I disable 2FA?")
    assert si.differs("Is coffee good for you?", "Is coffee not good for you?")
    assert si.differs("Convert 10 miles to km", "Convert 25 miles to km")
    assert si.differs("What is the capital of France?", "What is the capital of Germany?")
    assert not si.differs("How do I reverse a list in Python?", "How can I reverse a list in python")
    assert not si.differs("How do I sort a dictionary by value?", "How can I sort a dictionary by its values?")


def test_a_word_in_another_form_is_the_same_word_but_a_name_sharing_its_prefix_is_not():
    for a, b in [("value", "values"), ("sort", "sorting"), ("sort", "sorted"), ("sorted", "sorting"),
                 ("class", "classes"), ("query", "queries"), ("run", "running"), ("make", "making"),
                 ("stop", "stopped"), ("copy", "copied"), ("summary", "summarize"), ("install", "installation"),
                 ("configure", "configuration"), ("deploy", "deployment"), ("int", "integers"),
                 ("dict", "dictionary")]:
        assert not si.differs(f"Tell me about {a}", f"Tell me about {b}"), (a, b)
    # Sweden / Swedish: a nationality word is not matched to its country (see _forms), so a miss, never a
    # wrong answer.
    for a, b in [("Australia", "Austria"), ("Nigeria", "Niger"), ("Iran", "Iraq"), ("Java", "JavaScript"),
                 ("Slovakia", "Slovenia"), ("Colombia", "Columbia"), ("Sweden", "Swedish"), ("Austria", "Austrian"),
                 ("Germany", "German"), ("organ", "organization"), ("state", "station"), ("plan", "plane"),
                 ("Python2", "Python3"), ("x86", "x64")]:
        assert si.differs(f"Tell me about {a}", f"Tell me about {b}"), (a, b)
        assert si.differs(f"Tell me about {b}", f"Tell me about {a}"), (b, a)
    assert si.differs("What is the capital of Australia?", "What is the capital of Austria?")
    assert si.differs("What is the capital of Nigeria?", "What is the capital of Niger?")
    assert si.differs("How do I parse JSON in Java?", "How do I parse JSON in JavaScript?")


def test_a_name_added_or_left_out_is_another_subject_but_other_added_words_are_wording():
    for a, b in [("What is the capital of Korea?", "What is the capital of North Korea?"),
                 ("Population of Sudan", "Population of South Sudan"), ("Weather in York today", "Weather in New York today"),
                 ("What is the capital of Guinea?", "What is the capital of Guinea-Bissau?"),
                 ("How do I install numpy?", "How do I install numpy on Ubuntu?")]:
        assert si.differs(a, b) and si.differs(b, a), (a, b)
    for a, b in [("How do I sort a list in Python?", "How do I sort a Python list?"),
                 ("How do I sort a list in Python?", "How can I sort a list in Python quickly?"),
                 ("What is the capital of France?", "Tell me the capital city of France."),
                 ("Explain Docker volumes", "Explain Docker volumes in detail"),
                 ("Hello. Can you explain Kubernetes pods?", "Can you explain Kubernetes pods?")]:
        assert not si.differs(a, b) and not si.differs(b, a), (a, b)


def test_any_differing_number_is_a_swapped_subject_decimals_signs_and_separators_kept():
    assert si.differs("Convert 5 km to miles", "Convert 5.5 km to miles")
    assert si.differs("Convert 5.5 km to miles", "Convert 5 5 km to miles")
    assert si.differs("What is 5 °C in Fahrenheit?", "What is -5 °C in Fahrenheit?")
    assert si.differs("What is 5 °C in Fahrenheit?", "What is −5 °C in Fahrenheit?")      # U+2212
    assert si.differs("Solve x - 3 = 0", "Solve x 3 = 0")
    assert si.differs("Solve x - 3 = 0", "Solve x + 3 = 0")
    assert si.differs("Simplify a - b", "Simplify a + b")
    assert si.differs("What is 10 - 3?", "What is 3 - 10?")
    assert si.differs("What's new in Python 3.10?", "What's new in Python 3.1?")
    assert si.differs("What is 3.0 squared?", "What is 3 squared?"), "3.0 is kept apart from 3, as 3.10 from 3.1"
    assert si.differs("How do I reverse a list in Python 3?", "How do I reverse a list in Python?")
    assert not si.differs("Is 1,000 bigger than 999?", "Is 1000 bigger than 999?")
    assert not si.differs("Convert 1,500.5 m to feet", "How many feet is 1500.5 m?")
    assert not si.differs("What is 10% of 250?", "What is 10 percent of 250?")
    assert not si.differs("How do I enable two-factor authentication?", "How can I enable two factor authentication")
    assert si.words("Convert 5.5 km, -3 and 1,000") == ["convert", "5.5", "km", "3", "and", "1000"]
    assert si.figures("Convert 5.5 km, -3 and 1,000") == ["5.5", "-", "3", "1000"]


def test_paraphrases_that_passed_before_still_pass_among_them_the_bench_sets():
    for a, b in [("How do I sort a dictionary by value in Python?", "How can I sort a Python dict by its values?"),
                 ("Summarize the plot of Hamlet", "Give me a summary of the plot of Hamlet"),
                 ("How do I convert a string to an integer in Java?",
                  "How can I convert a string into an int in Java?"),
                 ("What are Python classes?", "What is a Python class?"),
                 ("How to write SQL queries", "How to write an SQL query"),
                 ("How do I undo the last git commit?", "How can I undo my last commit in git?"),
                 ("What is the capital of France?", "What's the capital city of France?")]:
        assert not si.differs(b, a), (a, b)


def test_a_reversal_differs_but_a_symmetric_swap_or_a_moved_phrase_does_not():
    """Trial 28: the embedding and the same_request judge read words, not their order."""
    for a, b in [("find flights from London to Paris tomorrow", "find flights from Paris to London tomorrow"),
                 ("convert 100 USD to EUR", "convert 100 EUR to USD"),
                 ("translate hello from English to French", "translate hello from French to English"),
                 ("Is Python faster than Java?", "Is Java faster than Python?"),
                 ("How long is the drive from Boston to New York?", "How long is the drive from New York to Boston?"),
                 ("Why choose Kotlin over Java?", "Why choose Java over Kotlin?"),
                 ("Can a dog eat cat food?", "Can a cat eat dog food?"),
                 ("London -> Paris trains", "Paris -> London trains"),
                 ("London \u2192 Paris trains", "Paris \u2192 London trains")]:
        assert si.reordered(a, b) and si.differs(b, a), (a, b)
    for a, b in [("What is the difference between TCP and UDP?", "What is the difference between UDP and TCP?"),
                 ("Compare Python and Java", "Compare Java and Python"),
                 ("Python vs Java for web development", "Java vs Python for web development"),
                 ("How do I reverse a list in Python?", "In Python, how do I reverse a list?"),
                 ("Find flights from London to Paris tomorrow", "Find me flights tomorrow from London to Paris"),
                 ("How do I convert JSON to YAML?", "What is the best way to convert JSON into YAML?"),
                 ("How do I get from the airport to downtown?", "How do I get to downtown from the airport?")]:
        assert not si.differs(b, a) and not si.differs(a, b), (a, b)
