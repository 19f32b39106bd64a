-- Owner channels (adapters/): the chat channels a home delivers the owner's messages to,
-- and each message's delivery to each of them. A message fans out to every enabled
-- channel in the commit that queues it. A channel marks a delivery `sending` before it
-- calls its API and `sent` (with the message's id there) after, so a crash between the
-- two leaves the delivery `in_doubt`: never sent again blind, and counted for the owner.
CREATE TABLE channels (
    name        TEXT PRIMARY KEY,
    enabled     INTEGER NOT NULL,
    updated_at  TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE channel_outbox (
    channel      TEXT NOT NULL,
    message_key  TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'sending', 'sent', 'in_doubt', 'failed', 'superseded')),
    remote_id    TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   TEXT,
    last_error   TEXT,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (channel, message_key)
) WITHOUT ROWID;
-- what a channel sends next: its pending deliveries in the order they were queued
CREATE INDEX idx_channel_outbox_pending ON channel_outbox(channel, seq) WHERE status = 'pending';
-- a reply in the chat names the message it answers by its id there
CREATE INDEX idx_channel_outbox_remote ON channel_outbox(channel, remote_id)
    WHERE remote_id IS NOT NULL;
