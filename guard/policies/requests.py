"""What a user's message asks the agent for: how many times to do something
("run the flaky test six times", "retry 3 times", "noch dreimal"), how many
things to make ("add 4 blank rows"), whether
to do it again at all ("again", "retry"), and whether to keep watching
something ("keep polling until it is green"). ``loops`` reads a message that
asks so as an instruction, never an interjection, lets the calls asked for
through before it denies, and never denies a poll the user asked to keep up.
"""

from __future__ import annotations

from guard._regex import lazy_compile
from guard.policies.reads import name_words

__all__ = [
    "UNTIL_REPEATS",
    "asks_to_keep_polling",
    "asks_to_repeat",
    "makes_thing",
    "requested_makes",
    "requested_repeats",
]

_NUMBERS = {
    word: n
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_REPEAT_REQUEST = lazy_compile(r"(?i)\b(\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?:more\s+)?times\b|\b(\d{1,2})x\b")
# The same count as users write it in other languages: a number, then the word for
# "times" ("noch dreimal", "3 mal", "trois fois", "tres veces", "três vezes", "cinque volte",
# "три раза", "vijf keer", "再跑三次", "3回")
_OTHER_NUMBERS = {
    word: n
    for words in (
        ("zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn"),
        ("deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix"),
        ("dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"),
        ("duas", "três", "quatro", "cinco", "seis", "sete", "oito", "nove", "dez"),
        ("dois",),
        ("due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove", "dieci"),
        ("два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять", "десять"),
        ("две",),
        ("twee", "drie", "vier", "vijf", "zes", "zeven", "acht", "negen", "tien"),
        "二三四五六七八九十",
        "两",
        ("두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉", "열"),
    )
    for n, word in enumerate(words, 2)
}
_TIMES_IN_WORDS = lazy_compile(
    r"(?i)\b(\d{1,3}|"
    + "|".join(w for w in _OTHER_NUMBERS if len(w) > 1)
    + r")\s*-?\s*(?:mal|fois|veces|vezes|volte|раза?|keer)\b"
)
_TIMES_IN_SIGNS = lazy_compile(
    r"(\d{1,3}|[两二三四五六七八九十])\s*(?:次|遍|回)|(\d{1,3}|두|세|네|다섯|여섯|일곱|여덟|아홉|열)\s*번"
)
# Counts a user leaves vague, read generously: the user asked for repeats.
_VAGUE = {"couple": 3, "few": 5, "several": 5, "multiple": 5, "many": 10, "bunch": 10}
_VAGUE_REQUEST = lazy_compile(
    r"(?i)\b(?:a\s+)?(couple|few|several|multiple|many|bunch)(?:\s+of)?\s+(?:more\s+)?(?:times|runs|tries|attempts)\b"
)
# "Submit six training runs", "spin up 15 load-test workers": a number of runs, jobs or workers asked for
_RUNS_REQUEST = lazy_compile(
    r"(?i)\b(\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?:[\w-]+\s+){0,2}?"
    r"(?:runs|jobs|workers|instances|copies|replicas|submissions|iterations|rounds|trials|seeds)\b"
)
# "Add 4 blank rows", "insert 5 new rows", "create 5 identical placeholder tickets", "make 3 copies":
# that many things made, each maybe the same call; what it says of them ends at "and" or "then" (another
# request's words)
_MAKE_REQUEST = lazy_compile(
    r"(?i)\b(?:add|create|make|insert|append|open|file|send|post|schedule|book|generate|upload|submit|"
    r"duplicate|copy|clone)\s+(?:another\s+)?(\d{1,3}|" + "|".join(_NUMBERS) + r")\s+"
    r"((?:[^\s.!?,;:]+\s+){0,4}?([a-z]{2,}s)\b(?:(?!\b(?:and|then)\b)[^.!?\n;,]){0,60})"
)
# what says the things asked for are alike: then they are, whatever else the request says
_ALIKE = lazy_compile(r"(?i)\b(?:blank|empty|identical|placeholder|dummy|same|duplicate)\b")
# what says each is its own: rows from a file, a mail to each attendee ("to the attendees"), one per item
_EACH_ITS_OWN = lazy_compile(
    r"(?i)\bfrom\b|\bto (?:the|all|each|every|our|my|your|their)?\s*(?:\w+\s+){0,2}\w+s\b|\b(?:each|every|per)\b"
)
_WORD_COUNTS = {"once": 1, "twice": 2, "thrice": 3, "double-check": 2, "doublecheck": 2, "double check": 2}
_WORD_REQUEST = lazy_compile(r"(?i)\b(twice|thrice|double[- ]?check)\b")
UNTIL_REPEATS = 20
"""Runs let through when the user asks to keep trying until something
happens ("keep running it until it passes")."""
_UNTIL_REQUEST = lazy_compile(
    r"(?i)\b(?:keep|continue|carry on)\s+(?:on\s+)?"
    r"(?:running|trying|retrying|re-?running|testing|calling|using|invoking|executing|hitting|querying|fetching)\b"
    r"|\b(?:run|try|retry|rerun|re-run|repeat|call|use|invoke|query|fetch)\b[^.!?\n]{0,40}"
    r"\b(?:until|repeatedly|again and again|over and over)\b"
)
# "Keep polling the order until it ships", "wait until the deploy is done", "继续检查"
_KEEP_POLLING = lazy_compile(
    r"(?i)\b(?:keep|continue|carry on|go on)\s+(?:polling|checking|watching|monitoring|waiting|refreshing)\b"
    r"|\bkeep (?:an |a close )?(?:eye|tabs) on\b"
    r"|\b(?:poll|check|wait|watch)\b[^.!?\n]{0,40}\b(?:until|till)\b"
    # a sentence that opens with watching something and asks to be told when it changes
    r"|(?:^|[.!?\n]\s*)(?:(?:please|(?:can|could|would|will) you(?: please)?|i (?:want|need) you to)\s+)?"
    r"(?:watch|monitor|poll)\s[^.!?\n]{0,60}\b(?:tell|let|notify|ping|alert) me\b"
    r"[^.!?\n]{0,10}\b(?:when|once|as soon as)\b"
    # not when the agent's own work is done: "tell me when you have a fix"
    r"(?!\s+you(?:'ve| have| are done|'re done| finish| fix| find| figure| get| solve| complete))"
    # the same asked in German, French, Spanish, Italian, Portuguese, Russian, Chinese and Japanese
    r"|\b(?:weiter\s+(?:prüfen|beobachten|überwachen|warten|abfragen)|(?:prüf|überprüf|beobacht|überwach|"
    r"wart|schau)\w*\b[^.!?\n]{0,30}\bweiter)\b|\b(?:prüf|überprüf|wart|beobacht|schau)\w*\b[^.!?\n]{0,40}\bbis\b"
    r"|\bcontinue[rz]?\s+(?:à|a)\s+(?:vérifier|surveiller|attendre|regarder|interroger)\b"
    r"|\b(?:vérifie|surveille|attends|regarde)\w*\b[^.!?\n]{0,40}\bjusqu"
    r"|\b(?:sigue|continúa|continue|continua)\s+(?:comprobando|revisando|verificando|checando|esperando|"
    r"monitoreando|monitorando|consultando|a\s+(?:controllare|verificar|verificare|monitorare|aspettare))\b"
    r"|\b(?:comprueba|revisa|verifica|espera|controlla|aspetta|verifique|espere)\w*\b[^.!?\n]{0,40}"
    r"\b(?:hasta|finché|finche|até)\b"
    r"|продолжай\s+(?:проверять|следить|ждать|опрашивать)|(?:проверяй|следи|жди)[^.!?\n]{0,40}\bпока\b"
    r"|(?:继续|一直|持续|不断)(?:检查|监控|等待|轮询|查看|观察)|(?:確認|チェック|監視|ポーリング)し続け"
)

# A request to repeat is a short message; a long one (a task, an issue to fix)
# uses "several times" or "until" to describe, not to ask.
_SHORT_REQUEST = 300


def requested_repeats(text: str) -> int:
    """How many times a user message asks for something to be done ("run
    the flaky test six times", "retry 3 times", "run it 5x", "twice", "a few
    times", "double-check", "keep running it until it passes"): the largest such count, 0
    when it asks for none. Counts are read in German, French, Spanish,
    Portuguese, Italian, Russian, Dutch, Chinese, Japanese and Korean too ("noch
    dreimal", "trois fois", "cinque volte", "再跑三次"). In a short message,
    vague counts are read generously (a few or several: 5; a couple: 3;
    many: 10), "until" as ``UNTIL_REPEATS``, and a number of runs, jobs or
    workers ("submit six training runs") as that many."""
    counts = [
        int(n or x) if (n or x).isdigit() else _NUMBERS[(n or x).lower()] for n, x in _REPEAT_REQUEST.findall(text)
    ]
    for found in (*_TIMES_IN_WORDS.findall(text), *(a or b for a, b in _TIMES_IN_SIGNS.findall(text))):
        counts.append(int(found) if found.isdigit() else _OTHER_NUMBERS[found.lower()])
    if len(text) <= _SHORT_REQUEST:
        counts.extend(_VAGUE[word.lower()] for word in _VAGUE_REQUEST.findall(text))
        counts.extend(_WORD_COUNTS[word.lower()] for word in _WORD_REQUEST.findall(text))
        counts.extend(int(n) if n.isdigit() else _NUMBERS[n.lower()] for n in _RUNS_REQUEST.findall(text))
        if _UNTIL_REQUEST.search(text):
            counts.append(UNTIL_REPEATS)
    return max(counts, default=0)


def requested_makes(text: str) -> dict[str, int]:
    """What a short user message asks to be made, and how many ("add 4
    blank rows", "insert 5 new rows", "create 5 identical placeholder
    tickets"): each thing's name (singular, lower-cased: ``row``,
    ``ticket``) with the largest count asked for it; none when it says each
    is its own ("add 20 rows from leads.csv", "send 30 invitations to the
    attendees") and not that they are alike. Unlike ``requested_repeats``
    it speaks only for calls that make that thing (``makes_thing``): the
    rest of the message ("add 20 unit tests, then open an issue") asked for
    no repeat."""
    made: dict[str, int] = {}
    if len(text) > _SHORT_REQUEST:
        return made
    for number, things, plural in _MAKE_REQUEST.findall(text):
        if _ALIKE.search(things) or not _EACH_ITS_OWN.search(things):
            thing = _singular(plural.lower())
            made[thing] = max(made.get(thing, 0), int(number) if number.isdigit() else _NUMBERS[number.lower()])
    return made


def _singular(plural: str) -> str:
    """A plural's singular, as far as a tool's name would spell it (``rows``
    → ``row``, ``copies`` → ``copy``, ``boxes`` → ``box``)."""
    if plural.endswith("ies"):
        return plural[:-3] + "y"
    if plural.endswith(("sses", "xes", "ches", "shes")):
        return plural[:-2]
    return plural[:-1]


# what tools call the things users ask for: a ticket is a Jira or GitHub issue, a ping a Slack message
_KIND_GROUPS = (
    frozenset({"issue", "ticket", "task", "bug", "story", "card"}),
    frozenset({"message", "email", "mail", "ping", "notification"}),
    frozenset({"row", "record", "entry", "value"}),
    frozenset({"event", "meeting", "invite", "appointment"}),
    frozenset({"column", "field"}),
    frozenset({"page", "doc", "document"}),
)
_KINDS = {word: group for group in _KIND_GROUPS for word in group}


def makes_thing(made: dict[str, int], name: str) -> int:
    """How many of what ``name`` (a tool's name, or a shell command) makes
    were asked for (``requested_makes``): 0 when it names none of them
    (``append_row`` names a row, ``gh issue create`` an issue)."""
    words = name_words(name)  # whole words: not "row" in "throw"
    named = {_singular(word) if word.endswith("s") else word for word in words} | words
    for word in list(named):
        named |= _KINDS.get(word, frozenset())
    return max((count for thing, count in made.items() if thing in named), default=0)


_REPEAT_WORDS = lazy_compile(
    r"(?i)\b(?:again|retry|re-?run|rerun|re-?try|once more|one more time|another (?:time|go|try)|"
    r"double[- ]?check|re-?check|re-?verify)\b"
)


def asks_to_repeat(text: str) -> bool:
    """Whether a user message asks for something to be done again ("again",
    "run it again", "retry", "keep polling"): an instruction, never an
    interjection."""
    return bool(_REPEAT_WORDS.search(text)) or asks_to_keep_polling(text)


# what says the opposite before it in its clause: "no need to keep checking", "don't wait until the end"
_NEGATED = lazy_compile(r"(?i)\b(?:no need to|don'?t|do not|never|without|instead of|rather than)\b")
_CLAUSE_END = ".!?\n;,"


def asks_to_keep_polling(text: str) -> bool:
    """Whether a user message asks to keep checking something ("keep
    polling", "wait until the deploy is done", "继续检查"; not "no need to
    keep checking"): then no poll of the agent's is denied until the next
    message, and a check that comes back unchanged is a poll."""
    for found in _KEEP_POLLING.finditer(text):
        start = found.start()
        clause = max(text.rfind(mark, 0, start) for mark in _CLAUSE_END) + 1
        if not _NEGATED.search(text, clause, start):
            return True
    return False
