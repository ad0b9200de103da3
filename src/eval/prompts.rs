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
