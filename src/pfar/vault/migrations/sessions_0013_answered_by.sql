-- Who answered (trust boundary): every decided question keeps who gave the answer and
-- through which surface ("cli (uid 1000, pid 4242)", "telegram (user 42)", "timeout"),
-- and every received credential who provided it. NULL on rows decided before this.
ALTER TABLE pending_approvals ADD COLUMN decided_by TEXT;
ALTER TABLE pending_credentials ADD COLUMN received_by TEXT;
