-- Each signature block's lowest and highest sequence number, so that
-- removing an item finds the blocks that may hold its signature from this
-- index alone and rewrites them without it (issue #25: deletes compact).
-- Blocks written before this migration have NULL bounds until their next
-- rewrite; a removal reads those whole.
ALTER TABLE vector_blocks ADD COLUMN lo BIGINT;
ALTER TABLE vector_blocks ADD COLUMN hi BIGINT;
CREATE INDEX IF NOT EXISTS vector_blocks_bounds ON vector_blocks (corpus, hi, lo);
