-- The announced holders of the pin ids in $pins (the pins operator actions dropped or found), as
-- the Consumer page reads its pin's: name and how the announcement was checked.
SELECT pin_id, name, verification FROM pin_holders WHERE list_contains($pins::VARCHAR[], pin_id);
