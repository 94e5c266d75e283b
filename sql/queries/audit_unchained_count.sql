SELECT count(*) FROM audit WHERE seq IS NULL;
