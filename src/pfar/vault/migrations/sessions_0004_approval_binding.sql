-- An approval is bound to the exact arguments it showed the owner: the sha256 of
-- their canonical JSON. Nothing else can run under it.
ALTER TABLE pending_approvals ADD COLUMN args_sha256 TEXT;
