"""The facts of the third corrections set (eval/recipes/corrections_third.py): one `Topic` per
thing a group in a voice call settles and then changes.

Each topic carries its own wording: `state` (the first statement, `{v}` is the value), `set`
(a clause that names the thing and its value, used after a change word or bare), `lead`
(a line that asks to change it without naming it), `pro` (a reply that gives the value without
naming the thing), `ask_old` (a question that names the old value `{old}`), `ctx` (a neutral
line about the thing, the context another person's correction leans on), `restate` (someone
repeats the value), `distract` (same subject, a different occasion, no value) and `ask` (how a
person asks the bot at the end, in other words; `{owner}` is who first said it).

Values are distinct across all topics (no value is a part of another one), and every form of a
value (`Value.say` and its aliases) is checked against each session by the generator.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Value:
    say: str
    aliases: tuple[str, ...] = ()

    @property
    def forms(self) -> tuple[str, ...]:
        return (self.say, *self.aliases)


@dataclass(frozen=True)
class Topic:
    key: str
    category: str
    values: tuple[Value, ...]
    state: tuple[str, ...]
    set: tuple[str, ...]
    lead: tuple[str, ...]
    pro: tuple[str, ...]
    ask_old: tuple[str, ...]
    ctx: tuple[str, ...]
    restate: tuple[str, ...]
    distract: tuple[str, ...]
    ask: tuple[str, ...]


def _v(*forms: str) -> Value:
    return Value(forms[0], tuple(forms[1:]))


TOPICS: tuple[Topic, ...] = (
    Topic(
        "curry_time", "time",
        (_v("half past eight", "8:30"), _v("quarter to nine", "8:45"), _v("twenty past seven", "7:20"),
         _v("ten to eight", "7:50"), _v("quarter past nine", "9:15")),
        ("Curry's booked for Saturday, we're meeting there at {v}.",
         "I've sorted the curry for Saturday, table's ours from {v}.",
         "So Saturday, curry, {v}. Tell your other halves."),
        ("the curry on Saturday is at {v}", "we're meeting for the curry at {v}", "Saturday's curry is {v}"),
        ("About Saturday night, could we push it back a bit? I've got my cousin's thing first.",
         "Saturday evening's a bit early for me, any chance we shift it?"),
        ("yeah fine, let's do {v} then", "they said {v} is the earliest they can move us to",
         "{v} works, I'll let them know"),
        ("Wait, are we still saying {old} for Saturday's food?", "Is it still {old} on Saturday or what?"),
        ("Did anyone ever hear back from the place for Saturday?", "Saturday's still on, right? The food thing?"),
        ("So {v} for the curry, yeah? Don't be late, they give the table away.",
         "Just so everyone's got it: curry, Saturday, {v}."),
        ("My dad's doing a curry night on Friday, he's gone mad with the chillies.",
         "The last curry place we went to took an hour to bring the naans.",
         "Anyone else's work do at a curry house this year? Ours is at six, which is criminal."),
        ("Clanky, what time do we need to be at the restaurant on Saturday?",
         "Clanky, when are we eating on Saturday night again?",
         "Hey Clanky, what time's {owner}'s Saturday dinner booking now?"),
    ),
    Topic(
        "kickoff_time", "time",
        (_v("half ten", "10:30"), _v("quarter past eleven", "11:15"), _v("ten to twelve", "11:50"),
         _v("twenty-five past ten", "10:25")),
        ("Five-a-side on Sunday kicks off at {v}, the pitch is booked for an hour.",
         "Sunday football, {v} kick-off, bring shin pads this time."),
        ("Sunday's five-a-side kicks off at {v}", "we're kicking off on Sunday at {v}", "the football's at {v}"),
        ("The Sunday morning kickabout, any chance we start a bit later? I'm on a late shift Saturday.",
         "Can we shift Sunday morning at all? Nobody's awake then."),
        ("right, {v} then, I'll tell the leisure centre", "they've only got {v} left, so that's it",
         "{v} it is, I'll bring the bibs"),
        ("Hang on, is it still {old} on Sunday?", "We're still kicking about at {old} though, yeah?"),
        ("Is the Sunday morning thing still happening?", "Are we all sorted for Sunday morning?"),
        ("Sunday, {v} kick-off, don't forget.", "So that's {v} at the pitch, I'll be there early."),
        ("The Champions League game's on Tuesday night, anyone watching?",
         "My little brother's team got battered yesterday, nine-nil.",
         "Last time I played five-a-side I pulled something in my calf.",
         "My son's under-nines kick off at eight on a Sunday, it's barbaric."),
        ("Clanky, what time do we start playing on Sunday?",
         "Clanky, when's the Sunday morning game starting?",
         "Clanky, when does {owner}'s Sunday kickabout start?"),
    ),
    Topic(
        "raid_time", "time",
        (_v("five past nine", "9:05"), _v("twenty-five to ten", "9:35"), _v("quarter to eleven", "10:45"),
         _v("ten past ten", "10:10")),
        ("Raid tomorrow starts at {v}, be in voice five minutes before with consumables.",
         "Tomorrow's raid, {v} start. I'll send invites at ten to."),
        ("tomorrow's raid starts at {v}", "we're pulling the first boss tomorrow at {v}",
         "raid night tomorrow is {v}"),
        ("Tomorrow night, can we go a bit later? I've got the kids till late.",
         "Is there any way we bump tomorrow's start back?"),
        ("fine, {v} then, I'll move the calendar thing", "let's say {v}, that gives everyone time",
         "{v} and not a minute later"),
        ("Is it still {old} for the raid tomorrow?", "Tomorrow's {old}, right?"),
        ("Are we all good for tomorrow night's run?", "Is tomorrow night still going ahead as planned?"),
        ("Reminder, {v} tomorrow for the raid.", "Tomorrow, {v}, flasks and food please."),
        ("The other guild raids at seven, they're all retired or something.",
         "Last week's raid went on till two in the morning, never again.",
         "My old raid group used to start at midnight, absolute chaos."),
        ("Clanky, what time is the boss run tomorrow night?",
         "Clanky, when do I need to be online tomorrow for {owner}'s group?",
         "Clanky, what time do we start tomorrow?"),
    ),
    Topic(
        "train_time", "time",
        (_v("the 16:08", "16:08"), _v("the 17:35", "17:35"), _v("the 15:47", "15:47"), _v("the 18:22", "18:22")),
        ("For Leeds on Friday, I've booked us on {v} out of Piccadilly.",
         "Train to Leeds Friday is {v}, I'll send everyone the tickets."),
        ("we're getting {v} to Leeds", "the Leeds train is {v}", "Friday's train is {v}"),
        ("Friday afternoon I can't leave work that early, can we get a later one?",
         "Is there a later option on Friday? My boss won't let me out."),
        ("okay, {v} then, I've swapped the tickets", "there's {v}, that's the next one with seats",
         "let's just get {v}"),
        ("Are we still on {old} Friday?", "Friday's {old}, isn't it?"),
        ("Is everyone sorted for getting to Leeds on Friday?", "Friday's trip is still on, right?"),
        ("So Friday, {v}, platform to be announced.", "Don't forget, {v} on Friday, I'm not waiting."),
        ("My mum's train to Bristol got cancelled three times last week.",
         "The last train home on Saturday is at ten past eleven, which is useless.",
         "Anyone else get stuck on the rail replacement bus on Sunday?"),
        ("Clanky, which departure are we catching to Leeds?",
         "Clanky, what time do we leave for Leeds on Friday?",
         "Clanky, when are {owner} and the rest of us heading off to Leeds?"),
    ),
    Topic(
        "final_pub", "place",
        (_v("the Red Lion"), _v("the Crooked Billet"), _v("the Pig and Whistle"), _v("the Feathers"),
         _v("the Bell and Compass")),
        ("For the final, we're watching it at {v}, they've got the big screen.",
         "I've asked about the final, we can have the back room at {v}."),
        ("we're watching the final at {v}", "the final's at {v}", "we're doing the match at {v}"),
        ("For the big match, could we go somewhere closer? I'm not getting two buses.",
         "The match night spot is miles from me, can we pick somewhere else?"),
        ("let's just do {v} then", "{v} said they'll keep a table", "fine, {v}, it's on the tram line"),
        ("Are we still going to {old} for the match?", "It's still {old} for the final, yeah?"),
        ("Is everyone sorted for the match next week?", "Are we all still watching the big game together?"),
        ("So it's {v} for the final, see you there.", "Final, {v}, get there early for a seat."),
        ("My local is showing the darts instead of the football, unbelievable.",
         "The last time we watched a final in a pub someone threw a pint at the telly.",
         "My brother's watching the final at his in-laws', poor guy.",
         "My work lot are watching it at the Royal Oak, they've already booked the snug."),
        ("Clanky, where are we watching the big game?",
         "Clanky, which boozer did we land on for the match?",
         "Clanky, where are we meeting {owner} for the match?"),
    ),
    Topic(
        "bday_venue", "place",
        (_v("Strike Alley"), _v("Roxy Lanes"), _v("the Ninepin Club"), _v("Bowlplex in Bramley")),
        ("For my birthday I've booked us into {v}, two games and then food.",
         "Birthday bowling is at {v}, I've paid the deposit."),
        ("the birthday bowling is at {v}", "we're bowling at {v} for the birthday", "the birthday do is at {v}"),
        ("For the birthday thing, can we go somewhere that isn't across town?",
         "The birthday plan, is there anywhere with parking instead?"),
        ("ok, {v} then, I've moved the booking", "{v} has lanes free, let's do that",
         "we can just go to {v} instead"),
        ("We're still going to {old} for the birthday though?", "Birthday's at {old}, right?"),
        ("Is the birthday thing all booked?", "Everyone's coming to the birthday, yeah?"),
        ("So, {v} for the birthday, bring socks.", "Birthday, {v}, don't be late."),
        ("My niece had her party at a trampoline park, twelve kids, one broken wrist.",
         "Bowling shoes are the grossest thing ever invented.",
         "I haven't bowled since I was about fourteen, I'll be awful.",
         "My cousin had her thirtieth at Laserzone, it was carnage."),
        ("Clanky, where are we going for {owner}'s birthday?",
         "Clanky, which place did the birthday end up at?",
         "Clanky, where are we rolling balls at for the birthday?"),
    ),
    Topic(
        "gig_spot", "place",
        (_v("under the big clock"), _v("outside the Boots by the station"), _v("by the ticket barriers"),
         _v("at the bottom of the escalators")),
        ("Before the gig, let's meet {v}, it's easy to find.",
         "For the gig on Thursday, meet {v} and we'll walk over together."),
        ("we're meeting {v} before the gig", "the gig meet-up is {v}", "we meet {v} for the gig"),
        ("Thursday, can we meet somewhere less rammed? It's always heaving there.",
         "Before Thursday's thing, is there a better place to find each other?"),
        ("let's just say {v}", "{v} is easier, trust me", "go {v} instead, you can't miss it"),
        ("Are we still meeting {old} on Thursday?", "Thursday's {old}, yeah?"),
        ("Thursday, we're all walking over together, right?", "Is everyone sorted for Thursday night?"),
        ("So {v} before the gig, got it.", "Thursday, {v}, I'll be the one in the yellow coat."),
        ("Last gig I went to, the support act was better than the band.",
         "My ears were ringing for two days after that festival.",
         "The venue's cloakroom queue is always longer than the gig.",
         "Last time I said meet by the fountain and lost my brother for an hour."),
        ("Clanky, where do we all gather before the concert?",
         "Clanky, where are we finding {owner} and the others on Thursday?",
         "Clanky, what's the meeting point for Thursday's show?"),
    ),
    Topic(
        "whipround", "number",
        (_v("fifteen quid", "£15"), _v("twenty-two quid", "£22"), _v("eighteen quid", "£18"),
         _v("twelve pounds fifty", "£12.50")),
        ("For Gary's leaving present, I'm saying {v} each, I'll send my bank details.",
         "Present collection is {v} a head, pay me whenever."),
        ("it's {v} each for the present", "the present whip-round is {v} a head",
         "everyone's chipping in {v} for the present"),
        ("About the collection, can we knock it down a bit? Payday's not till the thirtieth.",
         "The money for the present, is that per person? It's a lot."),
        ("fine, {v} each then", "if more people chip in it's {v}", "{v} and we're sorted"),
        ("Is it still {old} each for the present?", "We said {old} for the gift, right?"),
        ("Has everyone paid in for the present yet?", "Is the money for Gary's present all sorted?"),
        ("Reminder, {v} for the present, send it over.", "So {v} a head for the present, cheers."),
        ("My office did a collection and raised about nine pounds, embarrassing.",
         "I still owe my brother for the cinema tickets, actually.",
         "The card alone cost me four quid, cards are a scam."),
        ("Clanky, how much am I meant to send for the leaving gift?",
         "Clanky, what's each of us putting in for {owner}'s collection?",
         "Clanky, how much per person was the gift again?"),
    ),
    Topic(
        "table_size", "number",
        (_v("a table for nine"), _v("a table for eleven"), _v("a table for seven"), _v("a table for thirteen")),
        ("For the Sunday roast, I've booked {v}, so tell me if you're bringing anyone.",
         "Sunday lunch is sorted, {v} at one o'clock."),
        ("the Sunday roast booking is {v}", "we've got {v} on Sunday", "Sunday lunch is {v}"),
        ("Sunday lunch, my sister and her fella want to come, is that okay?",
         "For the Sunday thing, a couple of people dropped out, we should change the booking."),
        ("I've changed it to {v}", "they can do {v}, that's the most they've got",
         "I rang them, it's {v} now"),
        ("Are we still {old} on Sunday?", "Did you say {old} for the roast?"),
        ("Who's actually coming to the roast on Sunday?", "Is Sunday lunch all booked?"),
        ("So {v} on Sunday, confirmed.", "Just to say, {v} for the roast, I double-checked."),
        ("My nan does a roast for about twenty people every Christmas, no idea how.",
         "The carvery near me has stopped doing unlimited potatoes, scandal.",
         "My housemate's booked a table somewhere for his anniversary, he's terrified."),
        ("Clanky, how many seats did we book for Sunday lunch?",
         "Clanky, how many people is the booking for on Sunday?",
         "Clanky, how big is {owner}'s Sunday lunch reservation now?"),
    ),
    Topic(
        "cabin_price", "number",
        (_v("four hundred and twenty quid", "£420"), _v("three hundred and eighty quid", "£380"),
         _v("five hundred and ten quid", "£510"), _v("four hundred and sixty quid", "£460")),
        ("The cabin in the Lakes is {v} for the weekend, split between us.",
         "Found a cabin for the Lakes trip, {v} all in for the two nights."),
        ("the cabin comes to {v} all in", "the Lakes cabin is {v} for the weekend", "the cabin's {v} total"),
        ("The weekend away, is that the final price? It looked cheaper on the app.",
         "For the Lakes weekend, did they add the cleaning fee on?"),
        ("with the fees it's {v}", "they knocked it to {v} when I messaged", "it came out at {v} in the end"),
        ("The cabin was {old}, right?", "Are we still paying {old} for the Lakes?"),
        ("Has anyone paid for the Lakes place yet?", "Is the Lakes weekend actually booked now?"),
        ("So the cabin's {v}, I'll split it on the app.", "Cabin total, {v}, I'll do the maths."),
        ("My mate paid a fortune for a glamping pod with no heating.",
         "The petrol up to the Lakes is going to cost more than the weekend.",
         "My parents' caravan is free but it smells like wet dog.",
         "My mate's place in Wales was two hundred quid and had no curtains."),
        ("Clanky, how much does the weekend place in the Lakes cost us altogether?",
         "Clanky, what's the damage for the cottage thing {owner} found?",
         "Clanky, what did the Lakes accommodation come to?"),
    ),
    Topic(
        "driver", "person",
        (_v("Declan"), _v("Ruairi"), _v("Marguerite"), _v("Big Colm")),
        ("For the festival, {v} is driving us up, they've got the people carrier.",
         "Festival transport's sorted, {v} said they'd drive."),
        ("{v} is driving us to the festival", "{v}'s doing the festival drive", "the festival lift is {v}"),
        ("Festival weekend, is our lift actually still happening? I heard something.",
         "About getting up to the festival, isn't there a problem with the car?"),
        ("{v} said they'll take us now", "{v} can do it, they've borrowed a van",
         "{v} is doing it instead, he offered"),
        ("It's still {old} taking us to the festival?", "{old}'s driving us, right?"),
        ("Is the festival transport still sorted?", "How are we actually getting up to the festival?"),
        ("So {v}'s driving, I'll chip in for petrol.", "Festival, {v} at the wheel, leaving at eight."),
        ("My cousin drove to a festival once and the car got stuck in the mud for two days.",
         "I failed my driving test twice, I'm not touching a wheel.",
         "Whoever drives, I'm not sitting in the middle seat.",
         "My uncle drove us to a festival in a hearse once, true story."),
        ("Clanky, who's giving us a lift to the festival?",
         "Clanky, whose car are we going up in for the music weekend?",
         "Clanky, who's taking {owner} and the rest of us up to the festival?"),
    ),
    Topic(
        "dm", "person",
        (_v("Fenwick"), _v("Odalys"), _v("Pradeep"), _v("Auntie Rosalind")),
        ("The one-shot on Wednesday, {v} is running it, they've written a whole dungeon.",
         "Wednesday's D&D one-shot is being run by {v}."),
        ("{v} is running Wednesday's one-shot", "Wednesday's game master is {v}", "{v} is DMing Wednesday"),
        ("Wednesday's game, didn't the person running it cancel?",
         "For Wednesday night, do we still have someone behind the screen?"),
        ("{v} said they'll step in", "{v} can run it, there's a module ready", "{v} is doing it now"),
        ("{old} is still running Wednesday, right?", "Is it still {old} in charge Wednesday?"),
        ("Are we still good for Wednesday's game?", "Is Wednesday night's game actually happening?"),
        ("So {v} is running it Wednesday, be nice to them.", "Wednesday, {v}'s table, level three."),
        ("My old campaign lasted four years and we never finished it.",
         "I rolled three natural ones in a row last time, I'm cursed.",
         "Someone at work runs a campaign on his lunch break, which is dedication.",
         "My flatmate's running a horror one-shot on Saturday, I'm scared already."),
        ("Clanky, who's the game master for Wednesday's dungeon night?",
         "Clanky, who ended up in charge of the Wednesday tabletop game?",
         "Clanky, who's leading the game {owner} organised for Wednesday?"),
    ),
)
