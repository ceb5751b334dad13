"""Published figures of the 2018 CoSMo/KITE SFU load study (IPTComm 2018), for context in comparisons.

Their setup differs from ours: AWS c4.4xlarge SFU, one c4.xlarge client VM per participant, Chrome 67,
VP8 540x360@30 fake media, rooms of 7, SFU versions of 2018. None = not published.
"""
from __future__ import annotations

from .metrics import Table

COLUMNS = ["SFU (2018 version)", "Participants at target", "Checks passed (%)",
           "Ramp-up sent (Mbps, avg)", "Ramp-up sender RTT (ms, avg)", "Ramp-up RTT > 50 ms (%)",
           "Ramp-up received (Mbps, avg)", "Target sent (Mbps, avg)", "Target sender RTT (ms, avg)",
           "Target received (Mbps, avg)", "Knee (participants)"]

ROWS = [
    ["Jitsi Videobridge 0.1.1077", 280, 19, 1.36, 18, 6.4, 1.26, None, None, None, 245],
    ["Janus 0.4.3", 490, 57, 1.65, 61, 27.8, 1.60, 1.24, 268, 1.01, 270],
    ["Medooze 0.32.0", 490, 90, 1.00, 10, 1.9, 1.02, 0.22, 19, 0.22, 195],
    ["Kurento 6.7.0", 140, 58, 0.34, 576, 59.3, 0.31, 0.25, 1052, 0.12, 42],
    ["mediasoup 2.2.3", 490, 97, 1.39, 18, 6.5, 1.38, 0.79, 48, 0.70, 270],
]


def table() -> Table:
    return Table("study2018", "The 2018 study's published figures (different hardware, browsers and SFU versions)",
                 COLUMNS, ROWS,
                 note="Knees as the study describes them: receive bitrate starts falling (Medooze, Janus, "
                      "mediasoup), video stops (Jitsi), RTT rises sharply (Kurento). Kurento's send bitrate was "
                      "capped at 600 kbps, the others' at 1.7 Mbps.")
