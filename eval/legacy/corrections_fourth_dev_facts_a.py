"""Dev sessions 001-002 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py --split dev).

Written fresh for the dev split: topics, values, wordings and names share nothing with the held-out
facts in eval/legacy/corrections_fourth_facts_{a,b,c,d}.py. Same shape: `say` is the statement
(consecutive lines), `change` one block per change (two for `twice`), `old` / `new` restate the old
value before the change / the new one after it, `noise` are same-subject lines with no value, `q` the
probe, `expect` / `stale` the value forms. Roles a-d are distinct speakers; role "~" is anyone.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 61001,
        "title": "kart racing cups while planning a surprise anniversary meal",
        "speakers": ["Ines", "Bram", "Callum", "Yara", "Aurelio"],
        "game": "kart",
        "facts": [
            {
                "cat": "time",
                "style": "cue",
                "say": [
                    ("a", "so for my parents' anniversary thing, the table's booked for um"),
                    ("a", "half seven, they think it's just a normal tea"),
                ],
                "change": [[("a", "ok actually the restaurant rang back, they can only fit us in at quarter to nine")]],
                "new": [("c", "8:45 then, i'll tell my sister to stall them")],
                "noise": [
                    ("~", "do your parents even like surprises, my dad would hate it"),
                    ("~", "how long have they been married now, it's gotta be ages"),
                ],
                "q": "clanky, what hour is the surprise meal for my mum and dad?",
                "expect": ["quarter to nine", "8:45"],
                "stale": ["half seven"],
            },
            {
                "cat": "place",
                "style": "lead_in",
                "say": [("a", "we've got the back room at the olive grove, the one by the river")],
                "old": [("d", "olive grove does the good bread with the oil, nice")],
                "change": [
                    [
                        ("b", "wait my dad's allergic to like half of what they do there"),
                        ("~", "oh no"),
                        ("c", "right i'll cancel it and get the upstairs bit at luigi's then"),
                    ]
                ],
                "new": [("d", "luigi's is cute, they bring a cake out with a sparkler if you ask")],
                "noise": [("~", "is it fancy though, like do i need a shirt with actual buttons")],
                "q": "clanky, which restaurant did we end up going with for the big evening?",
                "expect": ["luigi's"],
                "stale": ["olive grove"],
            },
            {
                "cat": "number",
                "style": "twice",
                "say": [("a", "headcount's eleven people, that's with my aunties")],
                "change": [
                    [("b", "my cousins are driving down too so that's fourteen people")],
                    [
                        ("c", "ok proper final count for the booking"),
                        ("c", "sixteen people, my uncle's bringing his new girlfriend and her son"),
                    ],
                ],
                "new": [("a", "sixteen people, i'll ring and update the booking")],
                "noise": [("~", "does the restaurant even have a table that long")],
                "q": "clanky, how big is the group for my folks' do now?",
                "expect": ["sixteen people"],
                "stale": ["eleven people", "fourteen people"],
            },
            {
                "cat": "person",
                "style": "negation",
                "say": [("a", "my sister keeps asking who's giving the speech, i said uncle reggie")],
                "change": [
                    [("b", "reggie's not doing it anymore, he's lost his voice, your auntie margit said she'll do it")]
                ],
                "new": [("c", "margit's gonna cry halfway through, guaranteed")],
                "noise": [("~", "speeches at these things always go on way too long")],
                "q": "clanky, who's doing the toast for the couple?",
                "expect": ["margit"],
                "stale": ["reggie"],
            },
            {
                "cat": "item",
                "style": "question",
                "say": [("a", "i'm getting them a photo album from all of us, like a proper leather one")],
                "change": [
                    [
                        ("b", "are we still doing the photo album?"),
                        ("a", "nah my brother already made one, so it's a spa voucher instead"),
                    ]
                ],
                "new": [("c", "spa voucher is perfect, your mum's gonna love that")],
                "noise": [("~", "do we put cash in a card as well or is that tacky")],
                "q": "clanky, what's the gift we settled on from everybody?",
                "expect": ["spa voucher"],
                "stale": ["photo album"],
            },
            {
                "cat": "date",
                "style": "split",
                "say": [("a", "the meal's on saturday the 8th, don't make plans")],
                "change": [
                    [
                        ("c", "oh about the day for the anniversary thing"),
                        ("c", "it's the 15th now, my dad's work trip got moved"),
                    ]
                ],
                "new": [("b", "the 15th is better for me anyway tbh")],
                "noise": [("~", "wait is that the weekend the clocks go back")],
                "q": "clanky, when's the do for my folks happening, what date?",
                "expect": ["the 15th"],
                "stale": ["the 8th"],
            },
            {
                "cat": "plan",
                "style": "by_other",
                "say": [("a", "after the meal everyone goes back to theirs for a slideshow of old photos")],
                "change": [
                    [("b", "that thing after food, we're doing a boat trip on the canal instead, mum hates slideshows")]
                ],
                "new": [("c", "a boat trip at night, hope nobody gets seasick lol")],
                "noise": [("~", "are we sure your dad won't just fall asleep at like ten")],
                "q": "clanky, what are we up to once we've eaten?",
                "expect": ["boat trip"],
                "stale": ["slideshow"],
            },
            {
                "cat": "name",
                "style": "far",
                "say": [("a", "i made a group chat for the surprise, it's called operation lovebirds")],
                "old": [("c", "operation lovebirds lmao who came up with that")],
                "change": [
                    [
                        ("d", "i renamed the chat btw, my mum saw the old name on my phone"),
                        ("d", "it's ruby anniversary crew now, she won't clock that one"),
                    ]
                ],
                "noise": [("~", "keep the chat muted around your mum, she reads over shoulders")],
                "q": "clanky, what's the title of the whatsapp thread for my folks' thing?",
                "expect": ["ruby anniversary crew"],
                "stale": ["operation lovebirds"],
            },
        ],
    },
    {
        "seed": 61002,
        "title": "battle royale squads while sorting a friend's graduation day",
        "speakers": ["Noor", "Declan", "Ximena", "Ravi", "Petra", "Jun"],
        "game": "royale",
        "facts": [
            {
                "cat": "time",
                "style": "bare",
                "say": [
                    ("a", "so for leah's graduation, um, guests have to be"),
                    ("a", "seated by ten past eleven or they shut the doors"),
                ],
                "change": [[("b", "they emailed, doors close at twenty to one now, the ceremony got pushed")]],
                "new": [("c", "12:40 is way better, i can sleep in")],
                "noise": [("~", "how long do those things even last, is it like three hours of names")],
                "q": "clanky, what's the latest i can rock up to the uni thing?",
                "expect": ["twenty to one", "12:40"],
                "stale": ["ten past eleven"],
            },
            {
                "cat": "place",
                "style": "cue",
                "say": [("a", "after the ceremony we're all meeting up at the union bar")],
                "old": [("d", "union bar, god, that sticky floor")],
                "change": [[("a", "update on after, it's the hotel rooftop now, the union bar's gonna be rammed")]],
                "new": [("c", "hotel rooftop, fancy, i'll wear the good trainers")],
                "noise": [("~", "is there anywhere round there that does food after nine")],
                "q": "clanky, where do we go once the gowns come off?",
                "expect": ["hotel rooftop"],
                "stale": ["union bar"],
            },
            {
                "cat": "number",
                "style": "question",
                "say": [("a", "leah only got four tickets for the hall, so we're drawing straws")],
                "change": [
                    [
                        ("b", "is it still just four tickets?"),
                        ("c", "she got seven tickets in the end, someone's family dropped out"),
                    ]
                ],
                "new": [("a", "seven tickets means nobody has to sit outside")],
                "noise": [("~", "can you even film it from the back or is it no phones")],
                "q": "clanky, how many of us can actually get in to watch her walk?",
                "expect": ["seven tickets"],
                "stale": ["four tickets"],
            },
            {
                "cat": "person",
                "style": "split",
                "say": [("a", "her flatmate jasper's driving us home after, he's not drinking")],
                "change": [
                    [
                        ("c", "oh about the lift home thing"),
                        ("c", "it's sunniva now, jasper's got some family thing"),
                    ]
                ],
                "new": [("d", "sunniva drives like she's in a rally, pray for us")],
                "noise": [("~", "can we stop for chips on the way back, non negotiable")],
                "q": "clanky, who's our designated driver tonight?",
                "expect": ["sunniva"],
                "stale": ["jasper"],
            },
            {
                "cat": "item",
                "style": "far",
                "say": [("a", "everyone chip in, i'll grab a big bunch of sunflowers for her")],
                "old": [("b", "sunflowers are her favourite, good shout")],
                "change": [
                    [
                        ("d", "so i went into town and the florist was shut for the week"),
                        ("d", "got her a framed print of the campus instead, it's really nice"),
                    ]
                ],
                "noise": [("~", "should we get a card too, like everyone signs it")],
                "q": "clanky, what are we handing leah when she comes out?",
                "expect": ["framed print"],
                "stale": ["sunflowers"],
            },
            {
                "cat": "date",
                "style": "twice",
                "say": [("a", "the party at her mum's house is the first of july")],
                "change": [
                    [("b", "her mum's moved the party to the fourth of july, american vibes apparently")],
                    [
                        ("c", "ok last word on when the party is"),
                        ("c", "eleventh of july, final, she's booked the caterer"),
                    ],
                ],
                "new": [("a", "eleventh of july, writing it down now")],
                "noise": [("~", "is her mum the one with the massive dog")],
                "q": "clanky, when's the knees-up after the graduation?",
                "expect": ["eleventh of july"],
                "stale": ["first of july", "fourth of july"],
            },
            {
                "cat": "plan",
                "style": "negation",
                "say": [("a", "the night before we're doing a pub crawl round the old town")],
                "change": [
                    [("b", "no pub crawl anymore, she wants it quiet, so board games at mine")],
                ],
                "new": [("c", "board games, i'm bringing the one with the little trains")],
                "noise": [("~", "she'll be in bed by ten anyway knowing her")],
                "q": "clanky, what are we up to the evening beforehand?",
                "expect": ["board games"],
                "stale": ["pub crawl"],
            },
            {
                "cat": "name",
                "style": "by_other",
                "say": [("a", "the caption on the group photo is gonna be class of chaos")],
                "change": [[("b", "about the caption for the pic, leah wants it to say cap and gown gang")]],
                "new": [("d", "cap and gown gang is so her")],
                "noise": [("~", "who's got the decent camera, not a phone one")],
                "q": "clanky, what words are going under the picture we post?",
                "expect": ["cap and gown gang"],
                "stale": ["class of chaos"],
            },
        ],
    },
]
