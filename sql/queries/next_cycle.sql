-- The cycle being written becomes the current one (its rows are inserted with this number).
UPDATE current_cycle SET cycle = cycle + 1;
