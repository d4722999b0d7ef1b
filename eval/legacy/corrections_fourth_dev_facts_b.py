"""Dev sessions 003-004 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py --split dev).

Same shape as eval/legacy/corrections_fourth_dev_facts_a.py, written fresh for the dev split.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 61003,
        "title": "lane battler ranked games while booking a city break abroad",
        "speakers": ["Hamish", "Leilani", "Okon", "Freya"],
        "game": "moba",
        "facts": [
            {
                "cat": "time",
                "style": "twice",
                "say": [("a", "flights are booked, we land at nine fifteen on the friday")],
                "change": [
                    [("b", "they emailed, it's delayed already, we land at ten forty now")],
                    [
                        ("c", "ok another email, another time"),
                        ("c", "it's twenty past eleven now, they swapped the plane"),
                    ],
                ],
                "new": [("a", "twenty past eleven, so we're basically going straight to bed")],
                "noise": [("~", "do we need to print boarding passes or is it all on the app")],
                "q": "clanky, when are we getting in, like arriving?",
                "expect": ["twenty past eleven"],
                "stale": ["nine fifteen", "ten forty"],
            },
            {
                "cat": "place",
                "style": "far",
                "say": [("a", "the apartment's in the old harbour district, right on the water")],
                "old": [("c", "harbour district sounds so nice, boats and that")],
                "change": [
                    [
                        ("d", "so the host cancelled on us, bit of a nightmare"),
                        ("d", "found a new one though, it's up in the hill quarter near the castle"),
                    ]
                ],
                "noise": [("~", "is there a lift in the building, i'm not carrying my case up five floors")],
                "q": "clanky, which neighbourhood are we sleeping in on the trip?",
                "expect": ["hill quarter"],
                "stale": ["harbour district"],
            },
            {
                "cat": "number",
                "style": "cue",
                "say": [("a", "it works out at sixty euros each for the flat, send it whenever")],
                "change": [[("a", "scratch that, with the cleaning fee it's seventy five euros each")]],
                "new": [("b", "sent you 75 euros just now")],
                "noise": [("~", "do they take cards everywhere there or do we need cash")],
                "q": "clanky, what does a person owe for the accommodation?",
                "expect": ["seventy five euros", "75 euros"],
                "stale": ["sixty euros"],
            },
            {
                "cat": "person",
                "style": "bare",
                "say": [("a", "my mate lorenzo lives out there, he said he'd show us round on the saturday")],
                "change": [[("b", "lorenzo's away that weekend, his girlfriend marisa's gonna show us round")]],
                "new": [("c", "marisa knows all the good bars apparently")],
                "noise": [("~", "do they speak english there or am i pointing at things")],
                "q": "clanky, who's our tour guide while we're out there?",
                "expect": ["marisa"],
                "stale": ["lorenzo"],
            },
            {
                "cat": "item",
                "style": "lead_in",
                "say": [("a", "everybody pack an umbrella, it's meant to rain all weekend")],
                "change": [
                    [
                        ("b", "i just checked the forecast again"),
                        ("~", "and?"),
                        ("c", "it's gonna be roasting, bring sunglasses, not an umbrella"),
                    ]
                ],
                "new": [("d", "sunglasses packed, i'm ready")],
                "noise": [("~", "hand luggage only yeah? i'm not paying for a bag")],
                "q": "clanky, what should i throw in my case for the weather?",
                "expect": ["sunglasses"],
                "stale": ["umbrella"],
            },
            {
                "cat": "date",
                "style": "negation",
                "say": [("a", "we're flying out on the second of may, put it in your calendars")],
                "change": [[("b", "forget the second of may, the cheap seats are on the ninth of may")]],
                "new": [("a", "ninth of may, i've booked the time off")],
                "noise": [("~", "is that near a bank hol or are we taking proper days off")],
                "q": "clanky, which day are we setting off on this holiday?",
                "expect": ["ninth of may"],
                "stale": ["second of may"],
            },
            {
                "cat": "plan",
                "style": "split",
                "say": [("a", "saturday night i've booked us a food tour, like six stops")],
                "change": [
                    [
                        ("c", "ok so about saturday evening"),
                        ("c", "i swapped it for a sunset cruise, the food tour got cancelled"),
                    ]
                ],
                "new": [("b", "sunset cruise is so romantic for four mates lmao")],
                "noise": [("~", "i'm eating my body weight in pastries either way")],
                "q": "clanky, what's the big outing we've lined up mid-trip?",
                "expect": ["sunset cruise"],
                "stale": ["food tour"],
            },
            {
                "cat": "name",
                "style": "by_other",
                "say": [("a", "i've made the shared album for pics, it's called euro trippin")],
                "change": [[("b", "that album you made, i changed it to castle crew, sorry it was cringe")]],
                "new": [("c", "castle crew is fine, euro trippin was a crime")],
                "noise": [("~", "everyone turn on the setting so the pics upload full res")],
                "q": "clanky, what's the photo folder titled now?",
                "expect": ["castle crew"],
                "stale": ["euro trippin"],
            },
        ],
    },
    {
        "seed": 61004,
        "title": "co-op bank heist runs while helping a mate open his cafe",
        "speakers": ["Gideon", "Maeve", "Sanjay", "Astrid", "Kofi"],
        "game": "heist",
        "facts": [
            {
                "cat": "time",
                "style": "by_other",
                "say": [("a", "for painting kwesi's cafe we start at eight sharp on the sunday")],
                "change": [
                    [("b", "the start you said for the painting, kwesi wants us at half nine, the landlord's late")]
                ],
                "new": [("c", "half nine i can do, eight was brutal")],
                "noise": [("~", "is he at least buying us breakfast for this")],
                "q": "clanky, what time am i turning up with my roller?",
                "expect": ["half nine"],
                "stale": ["eight sharp"],
            },
            {
                "cat": "place",
                "style": "negation",
                "say": [("a", "we're getting all the paint from the big diy place on the retail park")],
                "change": [
                    [("b", "not the retail park, kwesi's uncle runs a trade counter on mill lane, get it there")]
                ],
                "new": [("d", "mill lane's closer for me anyway")],
                "noise": [("~", "do we need primer or does that stuff go straight on")],
                "q": "clanky, where are we picking up the tins from?",
                "expect": ["mill lane"],
                "stale": ["retail park"],
            },
            {
                "cat": "number",
                "style": "far",
                "say": [("a", "we need like twelve litres of the white for the walls")],
                "old": [("c", "twelve litres, that's loads, how big is this place")],
                "change": [
                    [
                        ("d", "so i measured the walls properly last night"),
                        ("d", "it's more like twenty litres, the back room's massive"),
                    ]
                ],
                "noise": [("~", "are we doing the ceiling too or just the walls")],
                "q": "clanky, how much emulsion should we buy altogether?",
                "expect": ["twenty litres"],
                "stale": ["twelve litres"],
            },
            {
                "cat": "person",
                "style": "cue",
                "say": [("a", "my mate dominika's doing the sign above the door, she does lettering")],
                "change": [[("a", "actually it's tobiah doing the sign, dominika's moved away")]],
                "new": [("c", "tobiah did my tattoo stencil, he's got a steady hand")],
                "noise": [("~", "is it gonna be painted on or like a proper hanging one")],
                "q": "clanky, who's painting the shopfront letters?",
                "expect": ["tobiah"],
                "stale": ["dominika"],
            },
            {
                "cat": "item",
                "style": "bare",
                "say": [("a", "bring old towels to cover the floor, he's just had it sanded")],
                "change": [[("b", "kwesi bought a load of dust sheets, so bring a step ladder if you've got one")]],
                "new": [("c", "i've got a step ladder, it's a bit wobbly but it's fine")],
                "noise": [("~", "i'm wearing my worst clothes, like my worst worst")],
                "q": "clanky, what am i meant to carry round to the cafe?",
                "expect": ["step ladder"],
                "stale": ["old towels"],
            },
            {
                "cat": "date",
                "style": "question",
                "say": [("a", "the grand opening's on the 23rd")],
                "change": [
                    [
                        ("b", "is the opening still the 23rd?"),
                        ("c", "nah the health inspection got pushed, it's the 30th now"),
                    ]
                ],
                "new": [("a", "the 30th, i'll tell my work")],
                "noise": [("~", "is he doing like a soft launch first or straight in")],
                "q": "clanky, when does the place open its doors to customers?",
                "expect": ["the 30th"],
                "stale": ["the 23rd"],
            },
            {
                "cat": "plan",
                "style": "twice",
                "say": [("a", "for the launch we're handing out free samples outside all morning")],
                "change": [
                    [("b", "kwesi reckons a raffle would pull more people in than samples")],
                    [
                        ("c", "right, final word on the launch thing"),
                        ("c", "live music in the window, his cousin's band, no raffle"),
                    ],
                ],
                "new": [("d", "live music in a cafe that size is gonna be so loud lol")],
                "noise": [("~", "does he even have a licence for that kind of stuff")],
                "q": "clanky, what's the gimmick to draw a crowd when it opens?",
                "expect": ["live music"],
                "stale": ["free samples", "raffle"],
            },
            {
                "cat": "name",
                "style": "lead_in",
                "say": [("a", "he's calling the cafe the daily grind")],
                "change": [
                    [
                        ("b", "turns out that name's taken by a place two streets over"),
                        ("~", "classic"),
                        ("d", "so he's going with bean there instead, the sign guy already knows"),
                    ]
                ],
                "new": [("c", "bean there is a terrible pun, i love it")],
                "noise": [("~", "he needs an instagram for it asap")],
                "q": "clanky, what's the coffee shop going to be known as?",
                "expect": ["bean there"],
                "stale": ["daily grind"],
            },
        ],
    },
]
