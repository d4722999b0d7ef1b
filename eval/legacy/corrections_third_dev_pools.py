"""Wording pools of the *dev* split of the third corrections set (eval/recipes/corrections_third.py).

Same roles as eval/legacy/corrections_third_pools.py (speakers, the lines that carry a change, the
chatter around the facts) with text of its own, so that the dev sessions share no wording with the
held-out ones. The dev facts are in eval/legacy/corrections_third_dev_topics*.py."""

from __future__ import annotations

SPEAKERS: tuple[str, ...] = ("Oluwaseun", "Brigid", "Matthias", "Priya", "Caoimhe", "Rasmus", "Esperanza",
                             "Gideon", "Anouk", "Thulani", "Fergal", "Soraya")

GAMES: tuple[tuple[str, str], ...] = (
    ("Satisfactory", "factory building"), ("Monster Hunter", "hunts"), ("Left 4 Dead 2", "expert campaigns"),
    ("Hunt: Showdown", "bounty runs"), ("Stardew Valley", "co-op farming"), ("Fortnite", "zero build squads"),
    ("Don't Starve Together", "survival evenings"), ("Golf With Your Friends", "custom courses"),
)
TITLE_TAIL = "with the week's arrangements shifting under everyone"

# --- the lines that carry a change -------------------------------------------------------
CUE: tuple[str, ...] = (
    "Correction, {set}.", "Small update, {set}.", "Oh, that's moved, {set}.", "Forget the earlier thing, {set}.",
    "New info, {set}.", "Hold up, it's different now, {set}.", "Plans changed, {set}.",
    "Heads up, that got changed, {set}.", "Different plan now, {set}.",
)
BARE: tuple[str, ...] = (
    "Okay, {set}.", "Cool cool, {set}.", "Right then, {set}, done.", "{set}, that's locked in.",
    "Grand, {set}.", "So yeah, {set}.", "Sound, {set}.",
)
NEGATION: tuple[str, ...] = (
    "It isn't {old} any more, {set}.", "Forget {old}, {set}.", "No longer {old}, {set}.",
    "Don't go by {old}, {set}.", "We've dropped {old}, {set}.",
)
TWO_TURN_ANSWER: tuple[str, ...] = (
    "No, it moved to {v}.", "Changed, it's {v} now.", "Nope, we went with {v}.", "It's {v} these days, mate.",
    "Not since this morning, {v}.", "Was, now it's {v}.",
)
OTHER_PERSON_INTRO: tuple[str, ...] = (
    "Oh, that reminds me, {pro}.", "Speaking of which, {pro}.", "Ooh, yes, {pro}.", "Mm, {pro}, by the way.",
    "About that one, {pro}.",
)
FAR_INTRO: tuple[str, ...] = (
    "Sorry to jump in, but ", "Nothing to do with this, but ", "Side note, ", "Before it slips my mind, ", "",
)
PRONOUN_INTRO: tuple[str, ...] = ("Fine, ", "Alright, ", "Okay, ", "Suppose so, ", "", "")  # only before a value

QUESTION_OPENERS: tuple[str, ...] = ("", "", "Hey, ", "One thing, ", "Can you check, ")

# --- chatter ----------------------------------------------------------------------------
GAME_LINES: tuple[str, ...] = (
    "Incoming, big one.", "I need a hand here.", "Lovely, got him.", "Who's got spare ammo?",
    "Don't open that door yet.", "I'm bleeding out.", "Regroup at the car.", "Grab the fuel can.",
    "I'll take the left path.", "Watch your feet, it's slippery.", "Anyone got a flashlight?",
    "That one's mine, back off.", "I've lost the others.", "Shoot the tank, shoot the tank!",
    "I'm crafting, give me a sec.", "Who dropped the bandages?", "Follow me, I know a shortcut.",
    "Okay, that was a terrible idea.", "Pick up the pace, lads.", "We're being chased.",
    "Hold the line here.", "I'll bait, you lot hit it from behind.", "Pause, my controller's dying.",
    "Right, checkpoint, breathe.", "There's loot in that cupboard.", "Quick, into the safe room.",
    "Is that thing still following us?", "Hit the weak spot on its tail.", "My stamina's gone.",
    "We've got this, we've got this.", "Mark it, I can't see it.", "I'm throwing a bomb, stand clear.",
    "Don't touch the red barrels.", "Somebody revive me, I'm on the stairs.", "Nice, that's the last one.",
)
GAME_TEMPLATES: tuple[str, ...] = (
    "{n} near {spot}, {state}.", "Check {spot}, I heard {n}.", "Heading to {spot}, {state}.",
    "{state}, near {spot}.", "Meet at {spot}.",
)
SPOTS: tuple[str, ...] = (
    "the old mill", "the cliff edge", "the gate", "the generator", "the barn", "the shed", "the river",
    "the warehouse", "the lift", "the far fence", "the lighthouse", "the chapel",
)
COUNTS: tuple[str, ...] = ("a few", "one big one", "a pair", "a swarm", "several", "just the one")
STATES: tuple[str, ...] = (
    "I'm nearly dead", "I'm fine for now", "stay quiet", "I'm reloading", "watch out", "I'm out of heals",
    "it's enraged", "hurry up", "I've got eyes on it",
)
TECH_LINES: tuple[str, ...] = (
    "Am I coming through alright?", "You just went all crackly.", "Whoops, forgot to unmute.",
    "There's a weird buzz on someone's line.", "My wifi's having a moment.", "The ping's through the roof tonight.",
    "Give me a minute, my PC wants to restart.", "Battery warning on my headphones, hang on.",
    "I can hear your telly through your mic.", "Your voice keeps skipping.", "Sorry, that was my fan spinning up.",
    "Rejoining the channel, one sec.", "Everyone went silent for me for a bit there.",
    "My mic settings reset themselves again.", "Okay, you sound normal again.", "Did the server just hiccup?",
    "I'm on my phone's hotspot, so bear with me.", "Who's typing so loud?",
)
BANTER_LINES: tuple[str, ...] = (
    "Ha, amazing.", "Get out.", "Stop it.", "I'm in bits.", "That's grim.", "Never.", "Makes sense.",
    "Pal.", "True, true.", "Same, honestly.", "Sorry, come again?", "Who raised you?", "Iconic.",
    "Not my fault.", "Witness protection, please.", "Tragic scenes.", "Textbook.", "Good for you.",
    "Unreal.", "Peak performance.", "Pure skill.", "Respect.", "Save that one.", "I'm wheezing.",
    "Brave.", "Would've done the same.", "Uh oh.", "Where were we?", "Hmm.", "Yep.", "Sure.", "Right then.",
    "Ha.", "Go for it.",
)
FOOD_LINES: tuple[str, ...] = (
    "I've not eaten since breakfast, I'm fading.", "Just had a bowl of porridge for dinner, student life.",
    "Crisp sandwich, the finest cuisine.", "Midnight cornflakes, no shame.", "Kettle's on, back in a sec.",
    "My housemate ate my leftovers again.", "Takeaway's arrived, muting for five.",
    "Third energy drink, I can see sounds.", "Hot take: gravy goes on everything.",
    "Those spicy crisps nearly killed me.", "Half a pack of custard creams, gone.",
)
FOOD_TEMPLATES: tuple[str, ...] = (
    "Who else is on the {food} tonight?", "I've overcooked the {food}, typical.",
    "Nothing beats a good {food}.", "I'd kill for a {food} right now.",
)
FOODS: tuple[str, ...] = (
    "bacon butty", "stir fry", "pot noodle", "omelette", "shepherd's pie", "pasta bake", "curry sauce and rice",
    "tuna melt", "bowl of soup", "pork pie",
)
WEATHER_LINES: tuple[str, ...] = (
    "It's pouring here, proper biblical.", "The wind's howling, the fence is rattling.",
    "Frost on the windscreen already, it's barely autumn.", "Close and sticky today, can't sleep.",
    "Lovely sunny day and I wasted it.", "We had sleet this afternoon.",
    "Got drenched on the way back from the corner shop.", "I've got a blanket and a hot water bottle on.",
    "Can't see the end of the street for the mist.", "Was that lightning?",
)
LIFE_LINES: tuple[str, ...] = (
    "Long day at work, I'm cooked.", "The cat's asleep on my keyboard hand.",
    "Got the optician tomorrow, not looking forward.", "Next door are knocking a wall down, sorry for the noise.",
    "I put up a shelf today and it's still up.", "Baby's down, so I'm whispering.",
    "Took up cycling, my legs have left the chat.", "Still no hot water in the flat.",
    "Big meeting tomorrow, wish me luck.", "Car's making a noise again.",
    "I binged a whole series about bridges instead of sleeping.", "My cousin's emigrating to Canada.",
    "I've started learning Spanish on an app.", "My tomato plants have given up.",
    "The trains were a mess tonight.", "Spent all afternoon on the phone to the council.",
    "My dog stole a whole loaf off the counter.", "Found twenty quid in the washing machine.",
)
LIFE_TEMPLATES: tuple[str, ...] = (
    "My {who} won't stop {doing}.", "Guess what, my {who} has taken up {doing}.",
    "Apologies, my {who} is {doing} next to me.",
)
WHO: tuple[str, ...] = ("dad", "cousin", "grandad", "lodger", "big brother", "auntie", "other half")
DOING: tuple[str, ...] = (
    "playing the bagpipes", "vacuuming", "watching darts", "whistling", "building model trains",
    "talking about house prices", "collecting mugs", "making kombucha",
)
QUESTIONS: tuple[str, ...] = (
    "Anyone up to anything nice this week?", "Is anyone watching that cooking competition?",
    "Who's top of the quiz league now?", "Has anyone finished that book everyone's on about?",
    "Is the new update as bad as people say?", "What's your comfort film?", "Best crisp flavour, go.",
)
ANSWERS: tuple[str, ...] = (
    "Salt and vinegar, no contest.", "Nothing much, catching up on sleep.", "I've seen a bit, it's alright.",
    "No chance.", "Ask me later.", "Maybe.", "Not great this season.",
)

# Little exchanges between two or three people, placed whole.
EXCHANGES: tuple[tuple[str, ...], ...] = (
    ("Hello? Anyone there?", "We're here.", "Phew."),
    ("Is the frame rate awful for anyone else?", "Smooth for me.", "Must be your laptop, then."),
    ("Who took my torch?", "Wasn't me.", "It was absolutely you."),
    ("Did I lock the back door?", "Go and look.", "Locked. Panic over."),
    ("Anyone seen the spare headset?", "On the sofa, I think.", "Got it, ta."),
    ("What's that rumbling?", "Tumble dryer.", "Sounds like a jet engine."),
    ("Catch the rugby earlier?", "Just the end.", "You missed the good bit."),
    ("Marks out of ten for my build?", "Three.", "Kind."),
    ("Who's done the least damage?", "Don't ask.", "We all know who."),
    ("Should I buy the deluxe edition?", "Nah.", "Obviously yes.", "You two are no help."),
    ("I dropped out, what happened?", "We all died.", "As usual."),
    ("What's it like outside there?", "Grim.", "Same, the washing's soaked."),
    ("Last one?", "Last one.", "It's never the last one."),
    ("Putting the kettle on, want one?", "Milk, no sugar.", "You live two hundred miles away."),
    ("How are you so good at this?", "Hours and hours.", "No social life, then."),
    ("Where is everybody?", "Up the hill.", "Which hill?"),
    ("How do I turn off the music?", "Settings, then sound.", "Sorted, cheers."),
    ("Early start tomorrow.", "So go to bed.", "Fair point."),
    ("Who's got the sniffles?", "Me, sorry.", "Mute, then, please."),
    ("Is there a plan?", "Nope.", "Perfect."),
    ("Who's healing?", "Me, I guess.", "That's worrying."),
    ("Dog's going off at a fox.", "This late?", "She's on patrol."),
    ("Anyone watching the new drama?", "Halfway through.", "No spoilers."),
    ("Is it lagging for you?", "Just you.", "Brilliant."),
    ("I'm playing awful tonight.", "You're alright.", "No, he's right, you're awful.", "Cheers."),
    ("What's everyone got to drink?", "Water.", "Wild.", "Cup of tea, naturally."),
    ("Explain the changes to me.", "Everything's worse.", "So, normal then."),
    ("Hang on, my mum's calling.", "Tell her hello.", "She says hello and get some sleep."),
)
