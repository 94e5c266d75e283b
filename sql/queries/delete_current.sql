-- The latest cycle replaces the live state of the accounts it covers: consumers gone from it stop showing.
DELETE FROM consumer_current WHERE list_contains($accounts, account);
