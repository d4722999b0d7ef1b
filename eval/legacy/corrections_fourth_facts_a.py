"""Sessions 001-002 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py).

A fact: `say` is the statement (consecutive lines), `change` one block per change (two for `twice`),
`old` / `new` restate the old value before the change / the new one after it, `noise` are
same-subject lines with no value, `q` the probe, `expect` / `stale` the value forms. Roles a-d are
distinct speakers of the session; role "~" is anyone, saying a filler that is not evidence.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 40401,
        "title": "ranked shooter grind while sorting a friend's bowling birthday",
        "speakers": ["Oksana", "Tariq", "Beatriz", "Kenji", "Siobhan"],
        "game": "shooter",
        "facts": [
            {
                "cat": "time",
                "style": "lead_in",
                "say": [
                    ("a", "ok so for dani's birthday i booked the lanes"),
                    ("a", "uh for two o'clock, it was like the only slot left"),
                ],
                "old": [("c", "two o'clock's fine, i'll just come straight from the gym")],
                "change": [
                    [
                        ("b", "hmm i can't do that early, i'm on shift till three"),
                        ("~", "oof"),
                        ("d", "ok let's push it to half four then, i'll ring them"),
                    ]
                ],
                "new": [("a", "yeah they moved us to 4:30, lane six")],
                "noise": [
                    ("~", "wait what time did we say for the bowling"),
                    ("~", "last time we went bowling someone threw the ball backwards, naming no names"),
                ],
                "q": "hey clanky, what time should i show up at the alley?",
                "expect": ["half four", "4:30"],
                "stale": ["two o'clock"],
            },
            {
                "cat": "place",
                "style": "question",
                "say": [("a", "and then food after is at marco's, i've booked a table")],
                "old": [("c", "marco's does that garlic bread thing, yes please")],
                "change": [
                    [
                        ("b", "wait is food still at marco's after?"),
                        ("a", "nah we switched to the thai place on the high street, marco's is shut for a refurb"),
                    ]
                ],
                "new": [("d", "oh the thai place, get the massaman, trust me")],
                "noise": [
                    ("~", "is dani still vegetarian or was that a phase"),
                    ("~", "where did we even eat last year, the burger one with the sticky tables?"),
                ],
                "q": "clanky, where are we going to eat later that evening?",
                "expect": ["thai place"],
                "stale": ["marco's"],
            },
            {
                "cat": "number",
                "style": "cue",
                "say": [("a", "for the present it's fifteen quid each, i'll send my bank details in the chat")],
                "change": [[("a", "oh actually make it twenty each, the voucher has like a minimum")]],
                "new": [("c", "sent my 20 quid btw")],
                "noise": [
                    ("~", "did everyone ever pay me back for hugo's leaving present"),
                    ("~", "what are we even getting her, like a voucher for what"),
                ],
                "q": "clanky how much am i chipping in for dani's gift?",
                "expect": ["twenty each", "20 quid"],
                "stale": ["fifteen quid"],
            },
            {
                "cat": "person",
                "style": "by_other",
                "say": [("a", "my cousin rosalind's gonna grab the cake from the bakery on the way")],
                "change": [
                    [("b", "oh and that thing your cousin was gonna do, wiktor's doing it now, she's stuck at work")]
                ],
                "new": [("c", "wiktor texted me, he's got it, chocolate one")],
                "noise": [("~", "is it a sponge or that fancy cheesecake thing")],
                "q": "clanky, who's picking up the dessert?",
                "expect": ["wiktor"],
                "stale": ["rosalind"],
            },
            {
                "cat": "item",
                "style": "split",
                "say": [("a", "someone bring jenga for after, dani's obsessed with it")],
                "old": [("d", "i've got jenga, the massive garden one")],
                "change": [
                    [
                        ("c", "oh wait, for the after bit"),
                        ("c", "bring the karaoke mic instead, her flatmate's got one of those tv setups"),
                    ]
                ],
                "noise": [
                    ("~", "are we going back to hers after or someone else's"),
                    ("~", "i'm not bringing anything, i'm bringing myself, that's the gift"),
                ],
                "q": "clanky, what am i supposed to carry over to her flat later?",
                "expect": ["karaoke mic"],
                "stale": ["jenga"],
            },
            {
                "cat": "date",
                "style": "negation",
                "say": [("a", "dani's thing is the 14th btw, put it in your calendars")],
                "change": [[("b", "not the 14th anymore, it's the 21st, her parents are down that weekend")]],
                "new": [("a", "the 21st yeah, i moved the booking")],
                "noise": [("~", "when's hugo's birthday again, it's soon right")],
                "q": "clanky, what's the date for the celebration?",
                "expect": ["the 21st"],
                "stale": ["the 14th"],
            },
            {
                "cat": "plan",
                "style": "far",
                "say": [("a", "and after food we're doing the escape room, the zombie one")],
                "old": [("c", "escape room with the actors in it? i'm gonna scream")],
                "change": [
                    [
                        ("d", "ok so i rang about the zombie thing and they're booked solid"),
                        ("d", "so we're doing the glow in the dark mini golf"),
                    ]
                ],
                "new": [("b", "mini golf, i'm actually cracked at mini golf")],
                "noise": [("~", "what was that place we did for nico's stag, with the axes")],
                "q": "clanky, what's the activity we picked for the end of the night?",
                "expect": ["mini golf"],
                "stale": ["escape room"],
            },
            {
                "cat": "name",
                "style": "bare",
                "say": [("a", "i'm putting our team name up on the screen as the gutter gremlins lol")],
                "change": [[("d", "i typed us in as pin pals on the booking form")]],
                "new": [("b", "pin pals is so bad i love it")],
                "noise": [("~", "do they still do the little animation when you get a strike")],
                "q": "clanky, what are we called on the scoreboard?",
                "expect": ["pin pals"],
                "stale": ["gutter gremlins"],
            },
        ],
    },
    {
        "seed": 40402,
        "title": "block-building server night, planning a long camping weekend",
        "speakers": ["Emeka", "Linnea", "Rafael", "Anouk", "Dmitri", "Haruto"],
        "game": "blocks",
        "facts": [
            {
                "cat": "time",
                "style": "cue",
                "say": [("a", "right so friday, we're setting off at six pm, don't be late")],
                "old": [("b", "six pm means leaving work early but fine")],
                "change": [[("a", "oh actually, we're leaving at quarter past seven, the car's not free till seven")]],
                "new": [("c", "7:15 at the meeting point, got it")],
                "noise": [("~", "last time we left at like midnight for that festival, never again")],
                "q": "clanky, when do we hit the road for the trip?",
                "expect": ["quarter past seven", "7:15"],
                "stale": ["six pm"],
            },
            {
                "cat": "place",
                "style": "twice",
                "say": [("a", "we'll all meet at the big tesco car park and convoy from there")],
                "change": [
                    [("b", "can we do the petrol station on the ring road? the tesco one's a nightmare on fridays")],
                    [
                        ("c", "ok final answer on where we gather"),
                        ("c", "park and ride. the petrol station's got like no spaces"),
                    ],
                ],
                "new": [("a", "park and ride it is then")],
                "noise": [("~", "do i need to fill up before or is there somewhere on the way")],
                "q": "clanky where's everyone regrouping before we drive up?",
                "expect": ["park and ride"],
                "stale": ["big tesco", "petrol station"],
            },
            {
                "cat": "number",
                "style": "lead_in",
                "say": [("a", "i booked the pitch for two nights, friday and saturday")],
                "change": [
                    [
                        ("b", "my boss just said i can take the monday off as well"),
                        ("~", "ooh"),
                        ("c", "sick, let's just stay three nights then, i'll extend it"),
                    ]
                ],
                "noise": [("~", "how long were we at the festival that time, felt like a month")],
                "q": "clanky, how long have we got the spot for in total?",
                "expect": ["three nights"],
                "stale": ["two nights"],
            },
            {
                "cat": "person",
                "style": "split",
                "say": [("a", "my brother femi's doing the cooking on the first night, he's got a proper stove")],
                "change": [[("b", "oh the food thing for friday"), ("b", "it's gustavo now, femi's got covid")]],
                "new": [("c", "gustavo makes a mean chilli")],
                "noise": [("~", "who's doing breakfast though, nobody said")],
                "q": "clanky who's making dinner when we arrive?",
                "expect": ["gustavo"],
                "stale": ["femi"],
            },
            {
                "cat": "item",
                "style": "by_other",
                "say": [("a", "everyone bring a head torch, it gets pitch black up there")],
                "change": [
                    [
                        (
                            "b",
                            "re that thing you said to pack, don't bother, i've got a box of them, "
                            "just bring a folding chair",
                        )
                    ]
                ],
                "new": [("c", "found my folding chair in the loft")],
                "noise": [("~", "do we need sleeping mats or is that a glamping thing")],
                "q": "clanky, what should i take with me for the weekend?",
                "expect": ["folding chair"],
                "stale": ["head torch"],
            },
            {
                "cat": "date",
                "style": "question",
                "say": [("a", "so the site's booked for the 6th, that's a friday")],
                "change": [
                    [("b", "are we still going on the 6th?"), ("c", "no it's the 13th now, they double booked us")]
                ],
                "new": [("a", "the 13th, yeah, i've swapped my shift")],
                "noise": [("~", "wait is that the same weekend as the marathon thing in town")],
                "q": "clanky which weekend are we away?",
                "expect": ["the 13th"],
                "stale": ["the 6th"],
            },
            {
                "cat": "plan",
                "style": "bare",
                "say": [("a", "saturday we're doing kayaking on the river, i already asked about the boats")],
                "change": [[("b", "i booked the gorge walk for saturday morning btw, it's like three hours")]],
                "new": [("d", "gorge walk is gonna destroy my knees lol")],
                "noise": [("~", "can everyone actually swim though, genuine question")],
                "q": "clanky, what's the main outing on day two?",
                "expect": ["gorge walk"],
                "stale": ["kayaking"],
            },
            {
                "cat": "name",
                "style": "negation",
                "say": [("a", "the place is called pine hollow, put it in your maps")],
                "change": [[("b", "not pine hollow anymore, it's ashcombe farm, the one by the quarry")]],
                "new": [("c", "ashcombe farm has hot showers at least")],
                "noise": [("~", "what was the one we went to with the goats")],
                "q": "clanky what's the name of where we're pitching up?",
                "expect": ["ashcombe farm", "ashcombe"],
                "stale": ["pine hollow"],
            },
        ],
    },
]
