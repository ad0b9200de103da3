//! The evaluation's prompt sets, written for this project.

/// Open-ended prompts for the diversity lens and the logit capture: short creative
/// requests where many continuations are good ones.
pub const OPEN_ENDED: [&str; 24] = [
    "Describe a market in a city that does not exist.",
    "Write the opening line of a story about a lighthouse keeper.",
    "Invent a new holiday and explain how people celebrate it.",
    "Describe the taste of a fruit nobody has eaten before.",
    "Write a short poem about rain on a tin roof.",
    "Give a name and a one-sentence description to a new constellation.",
    "Describe a room in a house at the bottom of the sea.",
    "Write a letter from a cat to its owner.",
    "Invent a board game and explain its main rule.",
    "Describe a morning in a village in the mountains.",
    "Tell me about an unusual job in the year 3000.",
    "Write a haiku about an old bicycle.",
    "Describe the sound of a forest at night.",
    "Invent a musical instrument and describe how it is played.",
    "Write the first paragraph of a fairy tale about a clockmaker.",
    "Describe a robot who loves gardening.",
    "Suggest a name for a bakery and describe its best pastry.",
    "Describe a journey across a desert on a strange animal.",
    "Write a short dialogue between the sun and the moon.",
    "Describe a library where the books can talk.",
    "Invent a sport played on ice and explain how to win.",
    "Describe the view from a window on a train in winter.",
    "Write a toast for the wedding of two dragons.",
    "Describe a festival of lanterns on a river.",
];

/// More open-ended prompts of the same kind, never captured: the online confirmation
/// (`eval confirm`) samples [`OPEN_ENDED`] and then these, so half of its prompts are
/// held out from the logits its temperatures were matched on.
pub const OPEN_ENDED_MORE: [&str; 24] = [
    "Describe a city built on the back of a giant turtle.",
    "Write the opening line of a story about a forgotten key.",
    "Invent a new color and describe what it looks like.",
    "Describe the smell of a bookshop after the rain.",
    "Write a short poem about a kettle coming to the boil.",
    "Give a name and a one-sentence description to a new island.",
    "Describe a garden that grows only at night.",
    "Write a letter from a tree to the wind.",
    "Invent a card game and explain how a round ends.",
    "Describe an evening in a harbour town in autumn.",
    "Tell me about a strange museum in a small town.",
    "Write a haiku about a paper boat.",
    "Describe the sound of a city waking up.",
    "Invent a kitchen tool and describe what it does.",
    "Write the first paragraph of a legend about a bridge.",
    "Describe a dragon who collects teacups.",
    "Suggest a name for a café on the moon and describe its menu.",
    "Describe a voyage on a ship made of glass.",
    "Write a short dialogue between a river and a mountain.",
    "Describe a school where the lessons are taught by birds.",
    "Invent a dance and explain its first steps.",
    "Describe the view from the top of a very old clock tower.",
    "Write a speech for the opening of a museum of lost socks.",
    "Describe a market held once a year under the snow.",
];

/// The first `n` open-ended prompts: [`OPEN_ENDED`], then [`OPEN_ENDED_MORE`] (at most
/// 48).
pub fn open_ended(n: usize) -> Vec<&'static str> {
    OPEN_ENDED
        .iter()
        .chain(OPEN_ENDED_MORE.iter())
        .copied()
        .take(n)
        .collect()
}

/// The first `n` prompts the offline screening never saw ([`OPEN_ENDED_MORE`]; the
/// capture, hence the selection, uses [`OPEN_ENDED`]): the confirmation half of the
/// cross-judged evaluation (at most 24).
pub fn held_out(n: usize) -> Vec<&'static str> {
    OPEN_ENDED_MORE.iter().copied().take(n).collect()
}
