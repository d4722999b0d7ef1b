"""Sessions 007-008 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py).

Same shape as corrections_fourth_facts_a: say / change / old / new / noise lines by roles a-d
("~" for a filler by anyone), the probe `q`, and the `expect` / `stale` value forms.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 40407,
        "title": "drawing and quiz party games, setting up a film night leaving do",
        "speakers": ["Wiremu", "Elif", "Bogdan", "Saoirse"],
        "game": "party",
        "facts": [
            {
                "cat": "time",
                "style": "question",
                "say": [("a", "so film night for jess's leaving do"), ("a", "doors at 7pm, don't be late")],
                "change": [[("b", "is it still 7pm?"), ("c", "nah 8pm, i'm on a late")]],
                "new": [("a", "8pm then, i'll tell jess")],
                "noise": [("~", "how long is the film even, if it's three hours i'm out")],
                "q": "clanky, what time does the movie evening start?",
                "expect": ["8pm"],
                "stale": ["7pm"],
            },
            {
                "cat": "place",
                "style": "far",
                "say": [("a", "we're going to the odeon in town, the big screen")],
                "change": [[("b", "oh so we're doing the picturehouse now, the odeon's sold out")]],
                "noise": [("~", "do they still let you bring your own sweets in")],
                "q": "clanky which cinema is it?",
                "expect": ["picturehouse"],
                "stale": ["odeon"],
            },
            {
                "cat": "number",
                "style": "cue",
                "say": [("a", "i booked six seats in a row, middle bit")],
                "change": [[("c", "actually i booked nine seats, my flatmates are coming too")]],
                "noise": [("~", "did anyone ask jess who she wants there")],
                "q": "clanky how many tickets did we get?",
                "expect": ["nine seats"],
                "stale": ["six seats"],
            },
            {
                "cat": "person",
                "style": "lead_in",
                "say": [("a", "kayode's sorting the taxi home")],
                "change": [
                    [
                        ("b", "wait the guy doing the cab is leaving at like ten though"),
                        ("~", "oh yeah"),
                        ("c", "right then cressida can book it"),
                    ]
                ],
                "new": [("d", "cressida's on it, she's got the app")],
                "noise": [("~", "last time the taxi dropped me at the wrong house")],
                "q": "clanky who's arranging our ride back?",
                "expect": ["cressida"],
                "stale": ["kayode"],
            },
            {
                "cat": "item",
                "style": "negation",
                "say": [("a", "everyone bring a leaving card for jess, sign it before")],
                "change": [[("b", "forget the leaving card, we're each bringing a polaroid for her scrapbook")]],
                "new": [("c", "i've got a polaroid of us at the zoo, perfect")],
                "noise": [("~", "is she actually leaving leaving or just changing teams")],
                "q": "clanky, what gift are we all handing over at the farewell?",
                "expect": ["polaroid"],
                "stale": ["leaving card"],
            },
            {
                "cat": "date",
                "style": "split",
                "say": [("a", "it's the 22nd, a thursday")],
                "change": [[("b", "oh the do for jess"), ("b", "it's moved to the 25th, her last day changed")]],
                "noise": [("~", "where's she even going, like which company")],
                "q": "clanky what date is the send off?",
                "expect": ["the 25th"],
                "stale": ["the 22nd"],
            },
            {
                "cat": "plan",
                "style": "twice",
                "say": [("a", "after the film we're hitting the arcade")],
                "change": [
                    [("b", "arcade's closed for a refurb, karaoke after?")],
                    [("c", "karaoke's booked out"), ("c", "night market then, it's on till late")],
                ],
                "noise": [("~", "i just want to go home after, i'm old")],
                "q": "clanky what are we doing when the movie finishes?",
                "expect": ["night market"],
                "stale": ["arcade", "karaoke"],
            },
            {
                "cat": "name",
                "style": "bare",
                "say": [("a", "we're seeing the long harvest, the one with the farmer guy")],
                "change": [[("c", "i got us tickets for paper moons btw")]],
                "new": [("d", "paper moons has like ninety four on rotten tomatoes")],
                "noise": [("~", "i hope it's not a subtitles one, i'll fall asleep")],
                "q": "clanky which movie are we watching?",
                "expect": ["paper moons"],
                "stale": ["long harvest"],
            },
        ],
    },
    {
        "seed": 40408,
        "title": "pirate ship co-op, planning a housewarming barbecue",
        "speakers": ["Mei", "Olusegun", "Tove", "Ricardo", "Inaaya"],
        "game": "pirate",
        "facts": [
            {
                "cat": "time",
                "style": "by_other",
                "say": [("a", "the bbq starts at one o'clock, come hungry")],
                "change": [
                    [
                        (
                            "b",
                            "oh that thing on sunday, it's three o'clock now, the neighbours have the driveway "
                            "till then",
                        )
                    ]
                ],
                "new": [("c", "3pm, sweet")],
                "noise": [("~", "what time does it finish though, i've got work monday")],
                "q": "clanky what time is the cookout?",
                "expect": ["three o'clock", "3pm"],
                "stale": ["one o'clock"],
            },
            {
                "cat": "place",
                "style": "negation",
                "say": [("a", "we're doing it at riverside park, by the bandstand")],
                "change": [
                    [("b", "forget riverside park, we're doing it in my back garden, the council wants a permit")]
                ],
                "noise": [("~", "is there parking near there or do i get the bus")],
                "q": "clanky, where's the do happening?",
                "expect": ["back garden"],
                "stale": ["riverside park"],
            },
            {
                "cat": "number",
                "style": "lead_in",
                "say": [("a", "the kitty is ten each for meat and drinks")],
                "change": [
                    [
                        ("b", "that's a lot for the students though"),
                        ("c", "fine, a fiver each then, i'll cover the rest"),
                    ]
                ],
                "noise": [("~", "who's actually collecting the money, is it a bank transfer thing")],
                "q": "clanky how much money do i owe for the food?",
                "expect": ["a fiver"],
                "stale": ["ten each"],
            },
            {
                "cat": "person",
                "style": "split",
                "say": [("a", "my uncle tunde's on the grill, he's a pro")],
                "change": [[("b", "about the grill"), ("b", "it's ashok doing it, tunde's away that weekend")]],
                "new": [("c", "ashok does those spicy wings right")],
                "noise": [("~", "do we need a second one or is one enough for everyone")],
                "q": "clanky who's in charge of the burgers?",
                "expect": ["ashok"],
                "stale": ["tunde"],
            },
            {
                "cat": "item",
                "style": "far",
                "say": [("a", "can everyone bring a salad or something")],
                "change": [[("c", "the big freezer died so instead of food just bring bags of ice")]],
                "noise": [("~", "i can't cook, i'm warning you now")],
                "q": "clanky, what's my contribution to take along?",
                "expect": ["bags of ice"],
                "stale": ["salad"],
            },
            {
                "cat": "date",
                "style": "cue",
                "say": [("a", "it's the 12th, put it in the calendar")],
                "change": [[("b", "scratch that, it's the 19th, my sister's away on the 12th")]],
                "new": [("c", "the 19th is perfect actually")],
                "noise": [("~", "is that a long weekend or am i making that up")],
                "q": "clanky when's the housewarming?",
                "expect": ["the 19th"],
                "stale": ["the 12th"],
            },
            {
                "cat": "plan",
                "style": "twice",
                "say": [("a", "we'll play rounders after we eat")],
                "change": [
                    [("b", "we'll never get enough people for rounders lol, swingball tournament?")],
                    [("c", "swingball's broken"), ("c", "water fight, i've got like six water guns")],
                ],
                "noise": [("~", "my neighbours are gonna love this")],
                "q": "clanky what game are we doing after the food?",
                "expect": ["water fight"],
                "stale": ["rounders", "swingball"],
            },
            {
                "cat": "name",
                "style": "question",
                "say": [("a", "the playlist's called sunburn anthems, add stuff")],
                "change": [[("b", "is it still sunburn anthems?"), ("c", "nah i made a new one, patio bangers")]],
                "new": [("d", "added like ten songs to patio bangers")],
                "noise": [("~", "no sad songs on there, i mean it")],
                "q": "clanky what's the name of the songs mix for the party?",
                "expect": ["patio bangers"],
                "stale": ["sunburn anthems"],
            },
        ],
    },
]
